// Ridge (C.7) and its eigen-solver: T11 (a planted linear map is recovered, R^2 ~ 1, with a
// small lambda), both variants, the primal and dual forms, and the Cholesky twin.

#include <hylens/interp/ridge.hpp>

#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace hylens;

namespace {

struct Planted {
    std::vector<double> X, T, W, b;
    std::size_t n, dx, dt;
};

Planted planted(std::size_t n, std::size_t dx, std::size_t dt, double noise, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    Planted p{std::vector<double>(n * dx), std::vector<double>(n * dt), std::vector<double>(dx * dt),
              std::vector<double>(dt), n, dx, dt};
    for (auto& w : p.W) w = nd(rng);
    for (auto& v : p.b) v = 3.0 * nd(rng);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t c = 0; c < dx; ++c) p.X[i * dx + c] = 2.0 * nd(rng) + 1.0;
        for (std::size_t o = 0; o < dt; ++o) {
            double t = p.b[o] + noise * nd(rng);
            for (std::size_t c = 0; c < dx; ++c) t += p.X[i * dx + c] * p.W[c * dt + o];
            p.T[i * dt + o] = t;
        }
    }
    return p;
}

double max_abs(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = hylens::test::nan_max(m, std::fabs(a[i] - b[i]));
    return m;
}

/// X = A^-1 B for A [d, d], B [d, m] by Gauss-Jordan elimination with partial pivoting (a
/// solver independent of ridge.hpp's eigen route and of its Cholesky twin).
std::vector<double> gauss_solve(std::vector<double> A, std::vector<double> B, std::size_t d, std::size_t m) {
    for (std::size_t c = 0; c < d; ++c) {
        std::size_t piv = c;
        for (std::size_t r = c + 1; r < d; ++r)
            if (std::fabs(A[r * d + c]) > std::fabs(A[piv * d + c])) piv = r;
        for (std::size_t k = 0; k < d; ++k) std::swap(A[c * d + k], A[piv * d + k]);
        for (std::size_t k = 0; k < m; ++k) std::swap(B[c * m + k], B[piv * m + k]);
        for (std::size_t r = 0; r < d; ++r) {
            if (r == c) continue;
            const double f = A[r * d + c] / A[c * d + c];
            for (std::size_t k = 0; k < d; ++k) A[r * d + k] -= f * A[c * d + k];
            for (std::size_t k = 0; k < m; ++k) B[r * m + k] -= f * B[c * m + k];
        }
    }
    for (std::size_t r = 0; r < d; ++r)
        for (std::size_t k = 0; k < m; ++k) B[r * m + k] /= A[r * d + r];
    return B;
}

/// Largest eigenvalue of a symmetric positive semi-definite G [d, d]: power iteration, the
/// Rayleigh quotient of the last iterate.
double largest_eigenvalue(const std::vector<double>& G, std::size_t d) {
    std::vector<double> x(d, 1.0), y(d);
    double rq = 0.0;
    for (int it = 0; it < 20000; ++it) {
        double nrm = 0.0;
        for (std::size_t i = 0; i < d; ++i) {
            y[i] = 0.0;
            for (std::size_t j = 0; j < d; ++j) y[i] += G[i * d + j] * x[j];
        }
        double xy = 0.0, xx = 0.0;
        for (std::size_t i = 0; i < d; ++i) {
            xy += x[i] * y[i];
            xx += x[i] * x[i];
            nrm += y[i] * y[i];
        }
        rq = xy / xx;
        nrm = std::sqrt(nrm);
        for (std::size_t i = 0; i < d; ++i) x[i] = y[i] / nrm;
    }
    return rq;
}

}  // namespace

TEST_SUITE("interp/ridge") {

TEST_CASE("symmetric_eigen: Q L Q^T reconstructs the matrix and Q is orthonormal") {
    for (std::size_t n : {1u, 2u, 7u, 40u}) {
        std::mt19937 rng(n);
        std::normal_distribution<double> nd;
        std::vector<double> M(n * n);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j <= i; ++j) M[i * n + j] = M[j * n + i] = nd(rng);
        if (n == 7) M.assign(n * n, 0.0), M[0] = 2.0, M[8] = 2.0;  // repeated eigenvalues and zeros
        std::vector<double> Q = M, L;
        hylens::detail::symmetric_eigen(Q, n, L);
        for (std::size_t k = 0; k + 1 < n; ++k) CHECK(L[k] <= L[k + 1]);
        double rec = 0, orth = 0;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                double s = 0, o = 0;
                for (std::size_t k = 0; k < n; ++k) {
                    s += Q[i * n + k] * L[k] * Q[j * n + k];
                    o += Q[k * n + i] * Q[k * n + j];
                }
                rec = std::max(rec, std::fabs(s - M[i * n + j]));
                orth = std::max(orth, std::fabs(o - (i == j ? 1.0 : 0.0)));
            }
        CHECK(rec <= 1e-10);
        CHECK(orth <= 1e-10);
    }
}

TEST_CASE("T11: ridge recovers a planted linear map with R^2 ~ 1 and a small lambda") {
    for (RidgeVariant v : {RidgeVariant::block_map, RidgeVariant::query_map}) {
        INFO(std::string(ridge_variant_name(v)));
        const Planted p = planted(400, 12, 5, 1e-3, 3);
        const Ridge r = Ridge::fit(p.X, p.T, p.n, {v, 0});
        CHECK(r.variant() == v);
        CHECK(r.r2() > 0.99999);
        CHECK(max_abs(r.W(), p.W) <= 1e-3);
        // a small lambda wins when the data are clean (<= 1e-4 of the largest eigenvalue)
        CHECK(r.lambda() <= 1e-4 * r.lambda_max());
        std::vector<float> x(p.dx);
        for (std::size_t c = 0; c < p.dx; ++c) x[c] = static_cast<float>(p.X[c]);
        const std::vector<float> y = r.apply(x);
        for (std::size_t o = 0; o < p.dt; ++o) CHECK(y[o] == doctest::Approx(p.T[o]).epsilon(1e-3));
    }
}

TEST_CASE("ridge: noisy targets choose a larger lambda than clean ones, pure noise has R^2 ~ 0") {
    const Planted clean = planted(300, 30, 3, 1e-4, 5);
    Planted noisy = planted(60, 30, 3, 20.0, 5);
    const Ridge rc = Ridge::fit(clean.X, clean.T, clean.n, {RidgeVariant::block_map, 0});
    const Ridge rn = Ridge::fit(noisy.X, noisy.T, noisy.n, {RidgeVariant::block_map, 0});
    CHECK(rn.lambda_exponent() > rc.lambda_exponent());
    std::mt19937 rng(9);
    std::normal_distribution<double> nd;
    for (auto& t : noisy.T) t = nd(rng);
    const Ridge r0 = Ridge::fit(noisy.X, noisy.T, noisy.n, {RidgeVariant::block_map, 0});
    CHECK(r0.r2() < 0.3);
    CHECK(r0.grid().size() == 17);  // p = -6 ... 2 step 0.5
    const Ridge rq = Ridge::fit(noisy.X, noisy.T, noisy.n, {RidgeVariant::query_map, 0});
    CHECK(rq.grid().size() == 19);  // p = -3 ... 6 step 0.5
}

TEST_CASE("ridge: the primal and dual forms agree with the Cholesky twin at the chosen lambda") {
    // dx < n_train: primal; dx > n_train: dual (fewer rows than features)
    for (std::size_t n : {200u, 20u}) {
        INFO("n = " << n);
        const Planted p = planted(n, 25, 4, 0.5, 11);
        const Ridge r = Ridge::fit(p.X, p.T, p.n, {RidgeVariant::query_map, 0});
        // query_map holds out the first n/5 rows: redo the centring on the rest by hand
        const std::size_t nv = n / 5, nt = n - nv;
        std::vector<double> Xc(nt * p.dx), Tc(nt * p.dt);
        for (std::size_t i = 0; i < nt; ++i) {
            for (std::size_t c = 0; c < p.dx; ++c) Xc[i * p.dx + c] = p.X[(nv + i) * p.dx + c] - r.x_mean()[c];
            for (std::size_t o = 0; o < p.dt; ++o) Tc[i * p.dt + o] = p.T[(nv + i) * p.dt + o] - r.t_mean()[o];
        }
        const std::vector<double> W = reference::ridge_solve(Xc, Tc, nt, r.lambda());
        double scale = 1;
        for (double w : W) scale = std::max(scale, std::fabs(w));
        CHECK(max_abs(r.W(), W) / scale <= 1e-6);
    }
}

TEST_CASE("ridge: bad shapes are errors") {
    CHECK_THROWS_AS(Ridge::fit(std::vector<double>(8), std::vector<double>(4), 4, {}), ShapeError);
    CHECK_THROWS_AS(Ridge::fit(std::vector<double>(10), std::vector<double>(7), 5, {}), ShapeError);
    CHECK_THROWS_AS(Ridge::fit(std::vector<double>(10, 1.0), std::vector<double>(10), 10, {}), ShapeError);  // constant X
}


TEST_CASE("ridge: the split, the centring, the lambda grid and the held-out error of A.10 and A.11, by hand") {
    // Recomputed here in double from the documented recipe (ridge.hpp's header):
    //   query_map: held out = the first min(500, n/5) rows; lambda = 10^p * 1e-6 * lambda_max,
    //     p = -3 ... 6; error = ||Xv W - Tv||^2 / ||Tv - mean(Tv)||^2.
    //   block_map: rows permuted by Fisher-Yates over std::mt19937_64(seed), `rng() % (i + 1)`;
    //     held out = the first min(4000, n/5) permuted rows; lambda = 10^p * lambda_max,
    //     p = -6 ... 2; error = ||Xv W - Tv||^2 / ||Tv||^2.
    //   Both: centred by the training rows' means; lambda_max of the centred Xt^T Xt; W solved on
    //   the training rows. n = 200 holds out 40 rows (n/4 would be 50).
    const Planted p = planted(200, 6, 3, 1.0, 21);
    const std::size_t n = p.n, dx = p.dx, dt = p.dt;
    const std::uint64_t seed = 3;
    for (RidgeVariant v : {RidgeVariant::query_map, RidgeVariant::block_map}) {
        INFO(std::string(ridge_variant_name(v)));
        const bool qm = v == RidgeVariant::query_map;
        const Ridge r = Ridge::fit(p.X, p.T, n, {v, seed});
        std::vector<std::size_t> order(n);
        for (std::size_t i = 0; i < n; ++i) order[i] = i;
        if (!qm) {
            std::mt19937_64 rng(seed);
            for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
        }
        const std::size_t nv = qm ? std::min<std::size_t>(500, n / 5) : std::min<std::size_t>(4000, n / 5);
        const std::size_t nt = n - nv;
        std::vector<double> xm(dx, 0.0), tm(dt, 0.0);
        for (std::size_t i = nv; i < n; ++i) {
            for (std::size_t c = 0; c < dx; ++c) xm[c] += p.X[order[i] * dx + c] / static_cast<double>(nt);
            for (std::size_t o = 0; o < dt; ++o) tm[o] += p.T[order[i] * dt + o] / static_cast<double>(nt);
        }
        CHECK(max_abs(r.x_mean(), xm) <= 1e-12);
        CHECK(max_abs(r.t_mean(), tm) <= 1e-12);
        // Gram G = Xt^T Xt and R = Xt^T Tt of the centred training rows.
        std::vector<double> G(dx * dx, 0.0), R(dx * dt, 0.0);
        for (std::size_t i = nv; i < n; ++i)
            for (std::size_t a = 0; a < dx; ++a) {
                const double xa = p.X[order[i] * dx + a] - xm[a];
                for (std::size_t b = 0; b < dx; ++b) G[a * dx + b] += xa * (p.X[order[i] * dx + b] - xm[b]);
                for (std::size_t o = 0; o < dt; ++o) R[a * dt + o] += xa * (p.T[order[i] * dt + o] - tm[o]);
            }
        const double lmax = largest_eigenvalue(G, dx);
        CHECK(r.lambda_max() == doctest::Approx(lmax).epsilon(1e-10));
        // The held-out denominator.
        double denom = 0.0;
        for (std::size_t o = 0; o < dt; ++o) {
            double mv = 0.0;
            for (std::size_t i = 0; i < nv; ++i) mv += (p.T[order[i] * dt + o] - tm[o]) / static_cast<double>(nv);
            for (std::size_t i = 0; i < nv; ++i) {
                const double t = p.T[order[i] * dt + o] - tm[o] - (qm ? mv : 0.0);
                denom += t * t;
            }
        }
        const double base = qm ? 1e-6 * lmax : lmax, p0 = qm ? -3.0 : -6.0;
        REQUIRE(r.grid().size() == (qm ? 19u : 17u));
        double best = std::numeric_limits<double>::infinity(), best_p = 0.0;
        for (std::size_t k = 0; k < r.grid().size(); ++k) {
            const double pk = p0 + 0.5 * static_cast<double>(k), lam = std::pow(10.0, pk) * base;
            CAPTURE(pk);
            std::vector<double> A = G;
            for (std::size_t a = 0; a < dx; ++a) A[a * dx + a] += lam;
            const std::vector<double> W = gauss_solve(A, R, dx, dt);
            double err = 0.0;
            for (std::size_t i = 0; i < nv; ++i)
                for (std::size_t o = 0; o < dt; ++o) {
                    double pred = 0.0;
                    for (std::size_t c = 0; c < dx; ++c) pred += (p.X[order[i] * dx + c] - xm[c]) * W[c * dt + o];
                    const double d = pred - (p.T[order[i] * dt + o] - tm[o]);
                    err += d * d;
                }
            err /= denom;
            CHECK(r.grid()[k].first == pk);
            CHECK(std::fabs(r.grid()[k].second - err) <= 1e-10 * err);
            if (err < best) {
                best = err;
                best_p = pk;
            }
        }
        // The error varies over the grid (the checks above see lambda), and the lowest one wins.
        CHECK(r.grid().back().second > 1.5 * best);
        CHECK(r.lambda_exponent() == best_p);
        CHECK(r.lambda() == doctest::Approx(std::pow(10.0, best_p) * base).epsilon(1e-12));
        CHECK(r.val_error() == doctest::Approx(best).epsilon(1e-10));
    }
}

}  // TEST_SUITE
