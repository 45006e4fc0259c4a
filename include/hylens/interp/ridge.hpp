#pragma once
// Closed-form centred ridge regression with held-out lambda selection, in float64
// (experiments.md §A.10 and §A.11; C.7 `Ridge`). Two variants, recorded in the fit:
//
//   query_map (§A.10, exp26): validation = the first min(500, n/5) rows as given;
//     lambda = 10^p * sigma_max^2 * 1e-6, p = -3 ... 6 step 0.5; error = ||Xv W - Tv||^2 /
//     ||Tv - mean(Tv)||^2 (relative to the variance of the held-out targets).
//   block_map (§A.11, exp27): rows permuted with seed 0, validation = the first
//     min(4000, n/5) permuted rows; lambda = 10^p * lambda_max(X^T X), p = -6 ... 2 step 0.5;
//     error = ||Xv W - Tv||^2 / ||Tv||^2 with Tv centred by the training means.
// In both, X and T are centred by the training means (the means are the intercept), X^T X
// (or X X^T when there are fewer training rows than features) is eigen-decomposed once, and
// W(lambda) = Q diag(1 / (Lambda + lambda)) Q^T X^T T for every lambda of the grid.
// R^2 = 1 - the chosen lambda's validation error. W is fitted on the training rows.
// The permutation is Fisher-Yates over std::mt19937_64(seed) (`rng() % (i + 1)`), so it is the
// same on every platform, but not numpy's.

#include <algorithm>  // std::max, std::min, std::fill
#include <cmath>      // std::sqrt, std::hypot, std::pow, std::fabs
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <limits>     // std::numeric_limits
#include <random>     // std::mt19937_64
#include <string>     // std::string
#include <utility>    // std::pair, std::swap
#include <vector>     // std::vector

#include "../core/error.hpp"

namespace hylens {

enum class RidgeVariant {
    query_map,  ///< §A.10 (exp26): first rows held out, lambda relative to sigma_max^2 * 1e-6
    block_map,  ///< §A.11 (exp27): permuted rows held out, lambda relative to lambda_max(X^T X)
};

inline const char* ridge_variant_name(RidgeVariant v) {
    return v == RidgeVariant::query_map ? "query_map (A.10)" : "block_map (A.11)";
}

namespace detail {

/// Eigen-decomposition of a symmetric n x n matrix (row-major, float64): on return `a` holds
/// the eigenvectors as columns and `w` the eigenvalues, ascending. Householder reduction to
/// tridiagonal form, then the implicit QL algorithm with shifts (Golub & Van Loan §8.3).
inline void symmetric_eigen(std::vector<double>& a, std::size_t n, std::vector<double>& w) {
    check<ShapeError>(a.size() == n * n, "[symmetric_eigen] ", a.size(), " values for a ", n, " x ", n, " matrix");
    w.assign(n, 0.0);
    if (n == 0) return;
    std::vector<double> e(n, 0.0);
    std::vector<double>& d = w;
    auto V = [&](std::size_t i, std::size_t j) -> double& { return a[i * n + j]; };
    // Householder tridiagonalisation; the transformations accumulate in V.
    for (std::size_t j = 0; j < n; ++j) d[j] = V(n - 1, j);
    for (std::size_t i = n - 1; i > 0; --i) {
        double scale = 0.0, h = 0.0;
        for (std::size_t k = 0; k < i; ++k) scale += std::fabs(d[k]);
        if (scale == 0.0) {
            e[i] = d[i - 1];
            for (std::size_t j = 0; j < i; ++j) {
                d[j] = V(i - 1, j);
                V(i, j) = 0.0;
                V(j, i) = 0.0;
            }
        } else {
            for (std::size_t k = 0; k < i; ++k) {
                d[k] /= scale;
                h += d[k] * d[k];
            }
            double f = d[i - 1], g = std::sqrt(h);
            if (f > 0) g = -g;
            e[i] = scale * g;
            h -= f * g;
            d[i - 1] = f - g;
            for (std::size_t j = 0; j < i; ++j) e[j] = 0.0;
            for (std::size_t j = 0; j < i; ++j) {
                f = d[j];
                V(j, i) = f;
                g = e[j] + V(j, j) * f;
                for (std::size_t k = j + 1; k < i; ++k) {
                    g += V(k, j) * d[k];
                    e[k] += V(k, j) * f;
                }
                e[j] = g;
            }
            f = 0.0;
            for (std::size_t j = 0; j < i; ++j) {
                e[j] /= h;
                f += e[j] * d[j];
            }
            const double hh = f / (h + h);
            for (std::size_t j = 0; j < i; ++j) e[j] -= hh * d[j];
            for (std::size_t j = 0; j < i; ++j) {
                f = d[j];
                g = e[j];
                for (std::size_t k = j; k < i; ++k) V(k, j) -= (f * e[k] + g * d[k]);
                d[j] = V(i - 1, j);
                V(i, j) = 0.0;
            }
        }
        d[i] = h;
    }
    for (std::size_t i = 0; i + 1 < n; ++i) {
        V(n - 1, i) = V(i, i);
        V(i, i) = 1.0;
        const double h = d[i + 1];
        if (h != 0.0) {
            for (std::size_t k = 0; k <= i; ++k) d[k] = V(k, i + 1) / h;
            for (std::size_t j = 0; j <= i; ++j) {
                double g = 0.0;
                for (std::size_t k = 0; k <= i; ++k) g += V(k, i + 1) * V(k, j);
                for (std::size_t k = 0; k <= i; ++k) V(k, j) -= g * d[k];
            }
        }
        for (std::size_t k = 0; k <= i; ++k) V(k, i + 1) = 0.0;
    }
    for (std::size_t j = 0; j < n; ++j) {
        d[j] = V(n - 1, j);
        V(n - 1, j) = 0.0;
    }
    V(n - 1, n - 1) = 1.0;
    e[0] = 0.0;

    // Implicit QL on the tridiagonal (d, e), rotating V along.
    for (std::size_t i = 1; i < n; ++i) e[i - 1] = e[i];
    e[n - 1] = 0.0;
    double f = 0.0, tst1 = 0.0;
    const double eps = std::numeric_limits<double>::epsilon();
    for (std::size_t l = 0; l < n; ++l) {
        tst1 = std::max(tst1, std::fabs(d[l]) + std::fabs(e[l]));
        std::size_t m = l;
        while (m < n && std::fabs(e[m]) > eps * tst1) ++m;
        if (m == n) m = n - 1;
        if (m > l) {
            int iter = 0;
            do {
                check<Error>(++iter <= 100, "[symmetric_eigen] QL iteration did not converge");
                double g = d[l];
                double p = (d[l + 1] - g) / (2.0 * e[l]);
                double r = std::hypot(p, 1.0);
                if (p < 0) r = -r;
                d[l] = e[l] / (p + r);
                d[l + 1] = e[l] * (p + r);
                const double dl1 = d[l + 1];
                double h = g - d[l];
                for (std::size_t i = l + 2; i < n; ++i) d[i] -= h;
                f += h;
                p = d[m];
                double c = 1.0, c2 = c, c3 = c, s = 0.0, s2 = 0.0;
                const double el1 = e[l + 1];
                for (std::size_t ii = m; ii-- > l;) {
                    c3 = c2;
                    c2 = c;
                    s2 = s;
                    g = c * e[ii];
                    h = c * p;
                    r = std::hypot(p, e[ii]);
                    e[ii + 1] = s * r;
                    s = e[ii] / r;
                    c = p / r;
                    p = c * d[ii] - s * g;
                    d[ii + 1] = h + s * (c * g + s * d[ii]);
                    for (std::size_t k = 0; k < n; ++k) {
                        h = V(k, ii + 1);
                        V(k, ii + 1) = s * V(k, ii) + c * h;
                        V(k, ii) = c * V(k, ii) - s * h;
                    }
                }
                p = -s * s2 * c3 * el1 * e[l] / dl1;
                e[l] = s * p;
                d[l] = c * p;
            } while (std::fabs(e[l]) > eps * tst1);
        }
        d[l] += f;
        e[l] = 0.0;
    }
    // Ascending order, columns of V alongside.
    for (std::size_t i = 0; i + 1 < n; ++i) {
        std::size_t k = i;
        for (std::size_t j = i + 1; j < n; ++j)
            if (d[j] < d[k]) k = j;
        if (k != i) {
            std::swap(d[i], d[k]);
            for (std::size_t r = 0; r < n; ++r) std::swap(V(r, i), V(r, k));
        }
    }
}

}  // namespace detail

/// A fitted centred ridge map f(x) = (x - x_mean) W + t_mean, W [dx, dt].
class Ridge {
public:
    struct Options {
        RidgeVariant variant = RidgeVariant::block_map;
        std::uint64_t seed = 0;  ///< row permutation (block_map)
    };

    /// Fits T [n, dt] from X [n, dx] (row-major float32 or float64 rows).
    template <class Scalar>
    static Ridge fit(const std::vector<Scalar>& X, const std::vector<Scalar>& T, std::size_t n, Options opt) {
        check<ShapeError>(n >= 5, "[Ridge] need at least 5 rows to hold some out, got ", n);
        check<ShapeError>(!X.empty() && X.size() % n == 0 && !T.empty() && T.size() % n == 0, "[Ridge] X (",
                          X.size(), " values) and T (", T.size(), " values) are not ", n, " rows each");
        Ridge r;
        r.variant_ = opt.variant;
        const std::size_t dx = X.size() / n, dt = T.size() / n;
        r.dx_ = dx;
        r.dt_ = dt;
        // Row order and the held-out split.
        std::vector<std::size_t> order(n);
        for (std::size_t i = 0; i < n; ++i) order[i] = i;
        std::size_t nv = 0;
        if (opt.variant == RidgeVariant::block_map) {
            std::mt19937_64 rng(opt.seed);
            for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
            nv = std::min<std::size_t>(4000, n / 5);
        } else {
            nv = std::min<std::size_t>(500, n / 5);
        }
        const std::size_t nt = n - nv;
        // Centred copies (training means).
        r.x_mean_.assign(dx, 0.0);
        r.t_mean_.assign(dt, 0.0);
        for (std::size_t i = nv; i < n; ++i) {
            for (std::size_t c = 0; c < dx; ++c) r.x_mean_[c] += static_cast<double>(X[order[i] * dx + c]);
            for (std::size_t c = 0; c < dt; ++c) r.t_mean_[c] += static_cast<double>(T[order[i] * dt + c]);
        }
        for (auto& v : r.x_mean_) v /= static_cast<double>(nt);
        for (auto& v : r.t_mean_) v /= static_cast<double>(nt);
        std::vector<double> Xt(nt * dx), Tt(nt * dt), Xv(nv * dx), Tv(nv * dt);
        for (std::size_t i = 0; i < n; ++i) {
            const bool val = i < nv;
            const std::size_t row = val ? i : i - nv;
            double* xd = (val ? Xv.data() : Xt.data()) + row * dx;
            double* td = (val ? Tv.data() : Tt.data()) + row * dt;
            for (std::size_t c = 0; c < dx; ++c) xd[c] = static_cast<double>(X[order[i] * dx + c]) - r.x_mean_[c];
            for (std::size_t c = 0; c < dt; ++c) td[c] = static_cast<double>(T[order[i] * dt + c]) - r.t_mean_[c];
        }
        r.solve(Xt, Tt, nt, Xv, Tv, nv);
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
    void solve(const std::vector<double>& Xt, const std::vector<double>& Tt, std::size_t nt,
               const std::vector<double>& Xv, const std::vector<double>& Tv, std::size_t nv) {
        const std::size_t dx = dx_, dt = dt_;
        // Primal (dx <= nt): G = X^T X = Q L Q^T, W = Q diag(1/(L+lam)) Q^T X^T T.
        // Dual (dx > nt): K = X X^T = U L U^T, W = X^T U diag(1/(L+lam)) U^T T.
        const bool primal = dx <= nt;
        const std::size_t r = primal ? dx : nt;
        std::vector<double> G(r * r, 0.0);
        if (primal) {
            for (std::size_t i = 0; i < nt; ++i) {
                const double* x = Xt.data() + i * dx;
                for (std::size_t a = 0; a < dx; ++a) {
                    if (x[a] == 0.0) continue;
                    for (std::size_t b = a; b < dx; ++b) G[a * dx + b] += x[a] * x[b];
                }
            }
        } else {
            for (std::size_t i = 0; i < nt; ++i)
                for (std::size_t j = i; j < nt; ++j) {
                    double s = 0.0;
                    for (std::size_t c = 0; c < dx; ++c) s += Xt[i * dx + c] * Xt[j * dx + c];
                    G[i * nt + j] = s;
                }
        }
        for (std::size_t a = 0; a < r; ++a)
            for (std::size_t b = 0; b < a; ++b) G[a * r + b] = G[b * r + a];
        std::vector<double> L;
        detail::symmetric_eigen(G, r, L);  // G now holds Q (or U) column-wise
        for (auto& v : L) v = std::max(v, 0.0);
        const double lmax = L.empty() ? 0.0 : L.back();
        lmax_ = lmax;
        check<ShapeError>(lmax > 0.0, "[Ridge] the training inputs are constant (X^T X = 0)");

        // A = Q^T X^T T (primal) or U^T T (dual): [r, dt].
        std::vector<double> A(r * dt, 0.0), XtT;
        if (primal) {
            XtT.assign(dx * dt, 0.0);
            for (std::size_t i = 0; i < nt; ++i)
                for (std::size_t a = 0; a < dx; ++a) {
                    const double x = Xt[i * dx + a];
                    if (x == 0.0) continue;
                    for (std::size_t o = 0; o < dt; ++o) XtT[a * dt + o] += x * Tt[i * dt + o];
                }
        }
        const std::vector<double>& rhs = primal ? XtT : Tt;
        for (std::size_t k = 0; k < r; ++k)
            for (std::size_t a = 0; a < r; ++a) {
                const double q = G[a * r + k];
                for (std::size_t o = 0; o < dt; ++o) A[k * dt + o] += q * rhs[a * dt + o];
            }
        // Z = Xv Q (primal) or Xv X^T U (dual): [nv, r]; validation predictions Z diag A.
        std::vector<double> B(primal ? 0 : nv * nt, 0.0);
        if (!primal)
            for (std::size_t i = 0; i < nv; ++i)
                for (std::size_t j = 0; j < nt; ++j) {
                    double s = 0.0;
                    for (std::size_t c = 0; c < dx; ++c) s += Xv[i * dx + c] * Xt[j * dx + c];
                    B[i * nt + j] = s;
                }
        const std::vector<double>& left = primal ? Xv : B;  // [nv, r]
        std::vector<double> Z(nv * r, 0.0);
        for (std::size_t i = 0; i < nv; ++i)
            for (std::size_t a = 0; a < r; ++a) {
                const double x = left[i * r + a];
                if (x == 0.0) continue;
                for (std::size_t k = 0; k < r; ++k) Z[i * r + k] += x * G[a * r + k];
            }
        // The denominator of the relative error.
        double denom = 0.0;
        if (variant_ == RidgeVariant::block_map) {
            for (double t : Tv) denom += t * t;
        } else {
            for (std::size_t o = 0; o < dt; ++o) {
                double m = 0.0;
                for (std::size_t i = 0; i < nv; ++i) m += Tv[i * dt + o];
                m /= static_cast<double>(nv);
                for (std::size_t i = 0; i < nv; ++i) denom += (Tv[i * dt + o] - m) * (Tv[i * dt + o] - m);
            }
        }
        denom = std::max(denom, std::numeric_limits<double>::min());

        const bool qm = variant_ == RidgeVariant::query_map;
        const double p0 = qm ? -3.0 : -6.0, p1 = qm ? 6.0 : 2.0, base = qm ? lmax * 1e-6 : lmax;
        double best = std::numeric_limits<double>::infinity();
        std::vector<double> pred(dt);
        grid_.clear();
        for (double p = p0; p <= p1 + 1e-9; p += 0.5) {
            const double lam = std::pow(10.0, p) * base;
            double err = 0.0;
            for (std::size_t i = 0; i < nv; ++i) {
                std::fill(pred.begin(), pred.end(), 0.0);
                for (std::size_t k = 0; k < r; ++k) {
                    const double z = Z[i * r + k] / (L[k] + lam);
                    for (std::size_t o = 0; o < dt; ++o) pred[o] += z * A[k * dt + o];
                }
                for (std::size_t o = 0; o < dt; ++o) {
                    const double dd = pred[o] - Tv[i * dt + o];
                    err += dd * dd;
                }
            }
            err /= denom;
            grid_.push_back({p, err});
            if (err < best) {
                best = err;
                lambda_ = lam;
                p_ = p;
            }
        }
        err_ = best;
        // W for the chosen lambda: Q diag A (primal) or X^T U diag A (dual).
        std::vector<double> S(r * dt);
        for (std::size_t k = 0; k < r; ++k)
            for (std::size_t o = 0; o < dt; ++o) S[k * dt + o] = A[k * dt + o] / (L[k] + lambda_);
        std::vector<double> QS(r * dt, 0.0);  // Q S: [r, dt]
        for (std::size_t a = 0; a < r; ++a)
            for (std::size_t k = 0; k < r; ++k) {
                const double q = G[a * r + k];
                for (std::size_t o = 0; o < dt; ++o) QS[a * dt + o] += q * S[k * dt + o];
            }
        if (primal) {
            W_ = std::move(QS);
        } else {
            W_.assign(dx * dt, 0.0);
            for (std::size_t j = 0; j < nt; ++j)
                for (std::size_t c = 0; c < dx; ++c) {
                    const double x = Xt[j * dx + c];
                    for (std::size_t o = 0; o < dt; ++o) W_[c * dt + o] += x * QS[j * dt + o];
                }
        }
    }

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
