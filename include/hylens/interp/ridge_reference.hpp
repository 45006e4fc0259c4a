#pragma once
// The hand-written ridge solver that Ridge used before it moved to LAPACK (interp/ridge.hpp),
// kept as a reference twin: tests compare the LAPACK solver against it on random problems and
// benchmarks/bench_ridge.cpp times the two. Not for studies: it is O(n^3) scalar loops.
//
//   symmetric_eigen_loops: Householder tridiagonalisation then implicit QL with shifts
//     (Golub & Van Loan §8.3), eigenvectors as columns of a row-major matrix, ascending.
//   ridge_solve_loops: the same primal / dual eigen route and lambda grid as the LAPACK
//     solver, with every product as plain loops.
// Use: Ridge::fit(X, T, n, options, reference::ridge_solve_loops).

#include <algorithm>  // std::max, std::fill
#include <cmath>      // std::sqrt, std::hypot, std::fabs
#include <cstddef>    // std::size_t
#include <limits>     // std::numeric_limits
#include <utility>    // std::swap, std::move
#include <vector>     // std::vector

#include "../core/error.hpp"
#include "ridge.hpp"

namespace hylens::reference {

/// Eigen-decomposition of a symmetric n x n matrix (row-major, float64): on return `a` holds
/// the eigenvectors as columns and `w` the eigenvalues, ascending. Householder reduction to
/// tridiagonal form, then the implicit QL algorithm with shifts (Golub & Van Loan §8.3).
inline void symmetric_eigen_loops(std::vector<double>& a, std::size_t n, std::vector<double>& w) {
    check<ShapeError>(a.size() == n * n, "[symmetric_eigen_loops] ", a.size(), " values for a ", n, " x ", n, " matrix");
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
                check<Error>(++iter <= 100, "[symmetric_eigen_loops] QL iteration did not converge");
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


inline RidgeSolution ridge_solve_loops(const RidgeProblem& pb) {
    const std::vector<double>&Xt = pb.Xt, &Tt = pb.Tt, &Xv = pb.Xv, &Tv = pb.Tv;
    const std::size_t dx = pb.dx, dt = pb.dt, nt = pb.nt, nv = pb.nv;
    RidgeSolution out;
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
    symmetric_eigen_loops(G, r, L);  // G now holds Q (or U) column-wise
    for (auto& v : L) v = std::max(v, 0.0);
    const double lmax = L.empty() ? 0.0 : L.back();
    out.lmax = lmax;
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
    const double denom = detail::ridge_val_denominator(pb);
    std::vector<double> pred(dt), errs;
    const auto lambdas = detail::ridge_lambda_grid(pb.variant, lmax);
    for (const auto& [p, lam] : lambdas) {
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
        errs.push_back(err / denom);
    }
    detail::ridge_pick(lambdas, errs, out);
    // W for the chosen lambda: Q diag A (primal) or X^T U diag A (dual).
    std::vector<double> S(r * dt);
    for (std::size_t k = 0; k < r; ++k)
        for (std::size_t o = 0; o < dt; ++o) S[k * dt + o] = A[k * dt + o] / (L[k] + out.lambda);
    std::vector<double> QS(r * dt, 0.0);  // Q S: [r, dt]
    for (std::size_t a = 0; a < r; ++a)
        for (std::size_t k = 0; k < r; ++k) {
            const double q = G[a * r + k];
            for (std::size_t o = 0; o < dt; ++o) QS[a * dt + o] += q * S[k * dt + o];
        }
    if (primal) {
        out.W = std::move(QS);
    } else {
        out.W.assign(dx * dt, 0.0);
        for (std::size_t j = 0; j < nt; ++j)
            for (std::size_t c = 0; c < dx; ++c) {
                const double x = Xt[j * dx + c];
                for (std::size_t o = 0; o < dt; ++o) out.W[c * dt + o] += x * QS[j * dt + o];
            }
    }
    return out;
}

}  // namespace hylens::reference
