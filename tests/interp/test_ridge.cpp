// Ridge (C.7) and its eigen-solver: T11 (a planted linear map is recovered, R^2 ~ 1, with a
// small lambda), both variants, the primal and dual forms, and the Cholesky twin.

#include <hylens/interp/ridge.hpp>

#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
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

}  // TEST_SUITE
