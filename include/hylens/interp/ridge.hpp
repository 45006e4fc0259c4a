#pragma once
// Closed-form centred ridge regression with held-out lambda selection, in float64
// (protocols.md §A.10 and §A.11; C.7 `Ridge`), on LAPACK. Two variants, recorded in the fit:
//
//   query_map (§A.10, exp26): validation = the first min(500, n/5) rows as given;
//     lambda = 10^p * sigma_max^2 * 1e-6, p = -3 ... 6 step 0.5; error = ||Xv W - Tv||^2 /
//     ||Tv - mean(Tv)||^2 (relative to the variance of the held-out targets).
//   block_map (§A.11, exp27): rows permuted with seed 0, validation = the first
//     min(4000, n/5) permuted rows; lambda = 10^p * lambda_max(X^T X), p = -6 ... 2 step 0.5;
//     error = ||Xv W - Tv||^2 / ||Tv||^2 with Tv centred by the training means.
// In both, X and T are centred by the training means (the means are the intercept), and the
// Gram matrix X^T X (primal, dx <= n_train) or X X^T (dual, fewer training rows than
// features) is formed once (dsyrk) and eigen-decomposed once (dsyevd, divide and conquer):
//   primal: W(lambda) = Q diag(1 / (L + lambda)) Q^T X^T T
//   dual:   W(lambda) = X^T U diag(1 / (L + lambda)) U^T T
// Every other product is a dgemm. R^2 = 1 - the chosen lambda's validation error. W is fitted
// on the training rows. The permutation is Fisher-Yates over std::mt19937_64(seed)
// (`rng() % (i + 1)`), so it is the same on every platform, but not numpy's.
//
// Accuracy: the Gram route squares the condition number of X, but the grid never goes below
// lambda = 1e-9 lambda_max (query_map, p = -3), so an eigenvalue error of eps * lambda_max
// moves a filter factor 1 / (L + lambda) by at most ~2e-7 relative; that is why dgesdd on X
// itself is not needed. The hand-written solver this replaced is kept as a reference twin in
// interp/ridge_reference.hpp (tests compare the two; benchmarks/bench_ridge.cpp times them).
//
// Threads: OpenBLAS is pinned to one thread in hylens (core/blas.hpp). A fit sets it to
// Options::threads for its own BLAS/LAPACK calls (default 1; 0 = the pool size) and pins it
// back to one before returning. More threads pay only on an idle machine: the tridiagonal
// reduction inside dsyevd synchronises its threads at every column, and on an oversubscribed
// machine a 2048 x 2048 dsyevd took 83 s on two threads against 13 s on one. Do not fit while
// other threads run BLAS.

#include <lapacke.h>  // LAPACKE_dsyevd

#include <algorithm>  // std::max, std::min
#include <cmath>      // std::sqrt, std::pow
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <limits>     // std::numeric_limits
#include <random>     // std::mt19937_64
#include <utility>    // std::pair, std::swap, std::move
#include <vector>     // std::vector

#include "../core/blas.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"

namespace hylens {

enum class RidgeVariant {
    query_map,  ///< §A.10 (exp26): first rows held out, lambda relative to sigma_max^2 * 1e-6
    block_map,  ///< §A.11 (exp27): permuted rows held out, lambda relative to lambda_max(X^T X)
};

inline const char* ridge_variant_name(RidgeVariant v) {
    return v == RidgeVariant::query_map ? "query_map (A.10)" : "block_map (A.11)";
}

/// The centred, split problem of one fit (row-major float64): training rows Xt [nt, dx],
/// Tt [nt, dt] and held-out rows Xv [nv, dx], Tv [nv, dt], all centred by the training means.
struct RidgeProblem {
    RidgeVariant variant = RidgeVariant::block_map;
    std::size_t dx = 0, dt = 0, nt = 0, nv = 0;
    std::vector<double> Xt, Tt, Xv, Tv;
    std::vector<double> x_mean, t_mean;  ///< the training means (the intercept)
};

/// What a ridge solver returns for a RidgeProblem.
struct RidgeSolution {
    std::vector<double> W;  ///< [dx, dt] at the chosen lambda
    double lambda = 0.0, p = 0.0, err = 1.0, lmax = 0.0;
    std::vector<std::pair<double, double>> grid;  ///< (p, held-out relative error) per lambda
};

namespace detail {

/// The lambda grid of a variant: (p, lambda) pairs, p ascending.
inline std::vector<std::pair<double, double>> ridge_lambda_grid(RidgeVariant v, double lmax) {
    const bool qm = v == RidgeVariant::query_map;
    const double p0 = qm ? -3.0 : -6.0, p1 = qm ? 6.0 : 2.0, base = qm ? lmax * 1e-6 : lmax;
    std::vector<std::pair<double, double>> g;
    for (double p = p0; p <= p1 + 1e-9; p += 0.5) g.push_back({p, std::pow(10.0, p) * base});
    return g;
}

/// The denominator of the relative validation error (see the variants above).
inline double ridge_val_denominator(const RidgeProblem& pb) {
    double denom = 0.0;
    if (pb.variant == RidgeVariant::block_map) {
        for (double t : pb.Tv) denom += t * t;
    } else {
        for (std::size_t o = 0; o < pb.dt; ++o) {
            double m = 0.0;
            for (std::size_t i = 0; i < pb.nv; ++i) m += pb.Tv[i * pb.dt + o];
            m /= static_cast<double>(pb.nv);
            for (std::size_t i = 0; i < pb.nv; ++i) denom += (pb.Tv[i * pb.dt + o] - m) * (pb.Tv[i * pb.dt + o] - m);
        }
    }
    return std::max(denom, std::numeric_limits<double>::min());
}

/// Records the grid and the lambda with the lowest error (the first one on a tie).
inline void ridge_pick(const std::vector<std::pair<double, double>>& lambdas, const std::vector<double>& errs,
                       RidgeSolution& out) {
    double best = std::numeric_limits<double>::infinity();
    out.grid.clear();
    for (std::size_t i = 0; i < lambdas.size(); ++i) {
        out.grid.push_back({lambdas[i].first, errs[i]});
        if (errs[i] < best) {
            best = errs[i];
            out.lambda = lambdas[i].second;
            out.p = lambdas[i].first;
        }
    }
    out.err = best;
}

/// Raises OpenBLAS to `n` threads for a scope and pins it back to one (core/blas.hpp's
/// setting) at the end.
class OpenblasThreads {
public:
    explicit OpenblasThreads(std::size_t n) {
        blas::detail::pin_openblas_once();
        openblas_set_num_threads(static_cast<int>(std::max<std::size_t>(n, 1)));
    }
    ~OpenblasThreads() { openblas_set_num_threads(1); }
    OpenblasThreads(const OpenblasThreads&) = delete;
    OpenblasThreads& operator=(const OpenblasThreads&) = delete;
};

inline int lapack_dim(std::size_t n, const char* what) {
    check<ShapeError>(n <= static_cast<std::size_t>(std::numeric_limits<int>::max()), "[Ridge] ", what, " = ", n,
                      " exceeds the 32-bit LAPACK/BLAS index range");
    return static_cast<int>(n);
}

/// C [M, N] = op(A) op(B) (+ C when accumulate), row-major float64.
inline void dgemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const double* A, std::size_t lda,
                  const double* B, std::size_t ldb, double* C, std::size_t ldc, bool accumulate = false) {
    if (M == 0 || N == 0) return;
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, lapack_dim(M, "M"),
                lapack_dim(N, "N"), lapack_dim(K, "K"), 1.0, A, lapack_dim(lda, "lda"), B, lapack_dim(ldb, "ldb"),
                accumulate ? 1.0 : 0.0, C, lapack_dim(ldc, "ldc"));
}

/// Eigen-decomposition of the symmetric n x n matrix whose upper triangle (row-major) `a`
/// holds, by LAPACK dsyevd: on return row k of `a` is the k-th eigenvector and `w` the
/// eigenvalues, ascending.
inline void syevd_rows(std::vector<double>& a, std::size_t n, std::vector<double>& w) {
    check<ShapeError>(a.size() == n * n, "[symmetric_eigen] ", a.size(), " values for a ", n, " x ", n, " matrix");
    w.assign(n, 0.0);
    if (n == 0) return;
    // Row-major upper = column-major lower; column k of the column-major result = row k here.
    const int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', lapack_dim(n, "n"), a.data(), lapack_dim(n, "n"),
                                    w.data());
    check<Error>(info == 0, "[symmetric_eigen] LAPACK dsyevd failed (info ", info, ") on a ", n, " x ", n,
                 " matrix", info < 0 ? " (bad argument)" : " (no convergence)");
}

/// Eigen-decomposition of a symmetric n x n matrix (row-major, float64, both triangles set):
/// on return `a` holds the eigenvectors as columns and `w` the eigenvalues, ascending.
inline void symmetric_eigen(std::vector<double>& a, std::size_t n, std::vector<double>& w) {
    syevd_rows(a, n, w);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j) std::swap(a[i * n + j], a[j * n + i]);
}

/// The LAPACK solver of a RidgeProblem (the route described at the top of this header).
inline RidgeSolution ridge_solve_lapack(const RidgeProblem& pb) {
    const std::size_t dx = pb.dx, dt = pb.dt, nt = pb.nt, nv = pb.nv;
    const bool primal = dx <= nt;
    const std::size_t r = primal ? dx : nt;
    RidgeSolution out;
    // Gram matrix, upper triangle: X^T X (primal) or X X^T (dual).
    std::vector<double> E(r * r, 0.0), L;
    cblas_dsyrk(CblasRowMajor, CblasUpper, primal ? CblasTrans : CblasNoTrans, lapack_dim(r, "r"),
                lapack_dim(primal ? nt : dx, "k"), 1.0, pb.Xt.data(), lapack_dim(dx, "dx"), 0.0, E.data(),
                lapack_dim(r, "r"));
    syevd_rows(E, r, L);  // E = Q^T (or U^T): eigenvectors as rows
    for (auto& v : L) v = std::max(v, 0.0);
    out.lmax = L.empty() ? 0.0 : L.back();
    check<ShapeError>(out.lmax > 0.0, "[Ridge] the training inputs are constant (X^T X = 0)");

    // A = Q^T X^T T (primal) or U^T T (dual): [r, dt].
    std::vector<double> A(r * dt);
    if (primal) {
        std::vector<double> XtT(dx * dt);
        dgemm(true, false, dx, dt, nt, pb.Xt.data(), dx, pb.Tt.data(), dt, XtT.data(), dt);
        dgemm(false, false, r, dt, r, E.data(), r, XtT.data(), dt, A.data(), dt);
    } else {
        dgemm(false, false, r, dt, r, E.data(), r, pb.Tt.data(), dt, A.data(), dt);
    }
    // Z = Xv Q (primal) or Xv X^T U (dual): [nv, r].
    std::vector<double> Z(nv * r);
    if (primal) {
        dgemm(false, true, nv, r, dx, pb.Xv.data(), dx, E.data(), r, Z.data(), r);
    } else {
        std::vector<double> B(nv * nt);
        dgemm(false, true, nv, nt, dx, pb.Xv.data(), dx, pb.Xt.data(), dx, B.data(), nt);
        dgemm(false, true, nv, r, nt, B.data(), nt, E.data(), r, Z.data(), r);
    }
    // Held-out error per lambda: ||(Z diag(1/(L+lam))) A - Tv||^2 / denom.
    const double denom = ridge_val_denominator(pb);
    const auto lambdas = ridge_lambda_grid(pb.variant, out.lmax);
    std::vector<double> Zs(nv * r), pred(nv * dt), errs;
    for (const auto& pl : lambdas) {
        for (std::size_t i = 0; i < nv; ++i)
            for (std::size_t k = 0; k < r; ++k) Zs[i * r + k] = Z[i * r + k] / (L[k] + pl.second);
        dgemm(false, false, nv, dt, r, Zs.data(), r, A.data(), dt, pred.data(), dt);
        double err = 0.0;
        for (std::size_t i = 0; i < nv * dt; ++i) {
            const double d = pred[i] - pb.Tv[i];
            err += d * d;
        }
        errs.push_back(err / denom);
    }
    ridge_pick(lambdas, errs, out);
    // W at the chosen lambda: Q S (primal) or X^T U S (dual), S = diag(1/(L+lam)) A.
    for (std::size_t k = 0; k < r; ++k)
        for (std::size_t o = 0; o < dt; ++o) A[k * dt + o] /= (L[k] + out.lambda);
    out.W.assign(dx * dt, 0.0);
    if (primal) {
        dgemm(true, false, dx, dt, r, E.data(), r, A.data(), dt, out.W.data(), dt);
    } else {
        std::vector<double> US(nt * dt);
        dgemm(true, false, nt, dt, r, E.data(), r, A.data(), dt, US.data(), dt);
        dgemm(true, false, dx, dt, nt, pb.Xt.data(), dx, US.data(), dt, out.W.data(), dt);
    }
    return out;
}

}  // namespace detail

/// Splits and centres X [n, dx], T [n, dt] (row-major float32 or float64) as `variant` says:
/// the row order (Fisher-Yates over std::mt19937_64(seed) for block_map), the held-out rows,
/// the training means.
template <class Scalar>
RidgeProblem ridge_problem(const std::vector<Scalar>& X, const std::vector<Scalar>& T, std::size_t n,
                           RidgeVariant variant, std::uint64_t seed = 0) {
    check<ShapeError>(n >= 5, "[Ridge] need at least 5 rows to hold some out, got ", n);
    check<ShapeError>(!X.empty() && X.size() % n == 0 && !T.empty() && T.size() % n == 0, "[Ridge] X (", X.size(),
                      " values) and T (", T.size(), " values) are not ", n, " rows each");
    // A NaN reached LAPACK, which said only "dsyevd failed (info -5) ... (bad argument)".
    for (const auto* m : {&X, &T})
        for (std::size_t i = 0; i < m->size(); ++i)
            check<ShapeError>(std::isfinite((*m)[i]), "[Ridge] ", m == &X ? "X" : "T", " row ", i / (m->size() / n),
                              " column ", i % (m->size() / n), " is ", (*m)[i], ": the fit needs finite values");
    RidgeProblem pb;
    pb.variant = variant;
    const std::size_t dx = X.size() / n, dt = T.size() / n;
    pb.dx = dx;
    pb.dt = dt;
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    if (variant == RidgeVariant::block_map) {
        std::mt19937_64 rng(seed);
        for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
        pb.nv = std::min<std::size_t>(4000, n / 5);
    } else {
        pb.nv = std::min<std::size_t>(500, n / 5);
    }
    const std::size_t nv = pb.nv, nt = n - nv;
    pb.nt = nt;
    pb.x_mean.assign(dx, 0.0);
    pb.t_mean.assign(dt, 0.0);
    for (std::size_t i = nv; i < n; ++i) {
        for (std::size_t c = 0; c < dx; ++c) pb.x_mean[c] += static_cast<double>(X[order[i] * dx + c]);
        for (std::size_t c = 0; c < dt; ++c) pb.t_mean[c] += static_cast<double>(T[order[i] * dt + c]);
    }
    for (auto& v : pb.x_mean) v /= static_cast<double>(nt);
    for (auto& v : pb.t_mean) v /= static_cast<double>(nt);
    pb.Xt.resize(nt * dx);
    pb.Tt.resize(nt * dt);
    pb.Xv.resize(nv * dx);
    pb.Tv.resize(nv * dt);
    for (std::size_t i = 0; i < n; ++i) {
        const bool val = i < nv;
        const std::size_t row = val ? i : i - nv;
        double* xd = (val ? pb.Xv.data() : pb.Xt.data()) + row * dx;
        double* td = (val ? pb.Tv.data() : pb.Tt.data()) + row * dt;
        for (std::size_t c = 0; c < dx; ++c) xd[c] = static_cast<double>(X[order[i] * dx + c]) - pb.x_mean[c];
        for (std::size_t c = 0; c < dt; ++c) td[c] = static_cast<double>(T[order[i] * dt + c]) - pb.t_mean[c];
    }
    return pb;
}

/// A fitted centred ridge map f(x) = (x - x_mean) W + t_mean, W [dx, dt].
class Ridge {
public:
    struct Options {
        RidgeVariant variant = RidgeVariant::block_map;
        std::uint64_t seed = 0;   ///< row permutation (block_map)
        std::size_t threads = 1;  ///< OpenBLAS threads during the fit; 0 = the pool size
    };

    /// Fits T [n, dt] from X [n, dx] (row-major float32 or float64 rows) with the LAPACK solver.
    template <class Scalar>
    static Ridge fit(const std::vector<Scalar>& X, const std::vector<Scalar>& T, std::size_t n, Options opt) {
        return fit(X, T, n, opt, detail::ridge_solve_lapack);
    }

    /// As fit, with another solver of the centred problem (reference::ridge_solve_loops).
    template <class Scalar, class Solver>
    static Ridge fit(const std::vector<Scalar>& X, const std::vector<Scalar>& T, std::size_t n, Options opt,
                     Solver&& solver) {
        RidgeProblem pb = ridge_problem(X, T, n, opt.variant, opt.seed);
        Ridge r;
        r.variant_ = opt.variant;
        r.dx_ = pb.dx;
        r.dt_ = pb.dt;
        r.x_mean_ = pb.x_mean;
        r.t_mean_ = pb.t_mean;
        RidgeSolution s;
        {
            detail::OpenblasThreads threads(opt.threads ? opt.threads : ThreadPool::instance().size());
            s = solver(pb);
        }
        r.W_ = std::move(s.W);
        r.lambda_ = s.lambda;
        r.p_ = s.p;
        r.err_ = s.err;
        r.lmax_ = s.lmax;
        r.grid_ = std::move(s.grid);
        return r;
    }

    /// f(X) for rows X [m, dx] (float32 in and out).
    std::vector<float> apply(const float* X, std::size_t m) const {
        std::vector<float> out(m * dt_);
        std::vector<double> xc(dx_), acc(dt_);
        for (std::size_t i = 0; i < m; ++i) {
            for (std::size_t c = 0; c < dx_; ++c) xc[c] = static_cast<double>(X[i * dx_ + c]) - x_mean_[c];
            acc = t_mean_;
            for (std::size_t c = 0; c < dx_; ++c) {
                const double x = xc[c];
                if (x == 0.0) continue;
                const double* w = W_.data() + c * dt_;
                for (std::size_t o = 0; o < dt_; ++o) acc[o] += x * w[o];
            }
            for (std::size_t o = 0; o < dt_; ++o) out[i * dt_ + o] = static_cast<float>(acc[o]);
        }
        return out;
    }
    std::vector<float> apply(const std::vector<float>& X) const {
        check<ShapeError>(dx_ > 0 && X.size() % dx_ == 0, "[Ridge::apply] ", X.size(), " values are not rows of ", dx_);
        return apply(X.data(), X.size() / dx_);
    }

    std::size_t in_dim() const noexcept { return dx_; }
    std::size_t out_dim() const noexcept { return dt_; }
    const std::vector<double>& W() const noexcept { return W_; }  ///< [dx, dt]
    const std::vector<double>& x_mean() const noexcept { return x_mean_; }
    const std::vector<double>& t_mean() const noexcept { return t_mean_; }
    double lambda() const noexcept { return lambda_; }
    double lambda_max() const noexcept { return lmax_; }  ///< largest eigenvalue of the centred X^T X
    double lambda_exponent() const noexcept { return p_; }  ///< the grid exponent p of the chosen lambda
    double r2() const noexcept { return 1.0 - err_; }       ///< 1 - held-out relative error
    double val_error() const noexcept { return err_; }
    RidgeVariant variant() const noexcept { return variant_; }
    /// (p, held-out relative error) for every lambda of the grid.
    const std::vector<std::pair<double, double>>& grid() const noexcept { return grid_; }

private:
    RidgeVariant variant_ = RidgeVariant::block_map;
    std::size_t dx_ = 0, dt_ = 0;
    std::vector<double> W_, x_mean_, t_mean_;
    double lambda_ = 0.0, p_ = 0.0, err_ = 1.0, lmax_ = 0.0;
    std::vector<std::pair<double, double>> grid_;
};

namespace reference {
/// Plain twin of one ridge solve: W = (X^T X + lam I)^{-1} X^T T for centred X [n, dx],
/// T [n, dt], by Cholesky (tests compare Ridge against it at the chosen lambda).
inline std::vector<double> ridge_solve(const std::vector<double>& X, const std::vector<double>& T, std::size_t n,
                                       double lam) {
    const std::size_t dx = X.size() / n, dt = T.size() / n;
    std::vector<double> G(dx * dx, 0.0), R(dx * dt, 0.0);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t a = 0; a < dx; ++a) {
            for (std::size_t b = 0; b < dx; ++b) G[a * dx + b] += X[i * dx + a] * X[i * dx + b];
            for (std::size_t o = 0; o < dt; ++o) R[a * dt + o] += X[i * dx + a] * T[i * dt + o];
        }
    for (std::size_t a = 0; a < dx; ++a) G[a * dx + a] += lam;
    // Cholesky G = C C^T (lower), then two triangular solves per column of R.
    std::vector<double> C(dx * dx, 0.0);
    for (std::size_t i = 0; i < dx; ++i)
        for (std::size_t j = 0; j <= i; ++j) {
            double s = G[i * dx + j];
            for (std::size_t k = 0; k < j; ++k) s -= C[i * dx + k] * C[j * dx + k];
            C[i * dx + j] = i == j ? std::sqrt(s) : s / C[j * dx + j];
        }
    std::vector<double> W(dx * dt);
    for (std::size_t o = 0; o < dt; ++o) {
        std::vector<double> y(dx);
        for (std::size_t i = 0; i < dx; ++i) {
            double s = R[i * dt + o];
            for (std::size_t k = 0; k < i; ++k) s -= C[i * dx + k] * y[k];
            y[i] = s / C[i * dx + i];
        }
        for (std::size_t i = dx; i-- > 0;) {
            double s = y[i];
            for (std::size_t k = i + 1; k < dx; ++k) s -= C[k * dx + i] * W[k * dt + o];
            W[i * dt + o] = s / C[i * dx + i];
        }
    }
    return W;
}
}  // namespace reference

}  // namespace hylens
