// The LAPACK ridge solver (interp/ridge.hpp) against the hand-written solver it replaced
// (interp/ridge_reference.hpp) on random problems, primal and dual, both variants.
//
// Tolerance. Both solvers are backward stable eigen-decompositions of the same Gram matrix,
// so each computes the exact ridge solution of a Gram perturbed by ~c n eps lambda_max. The
// solution W(lambda) = (G + lambda I)^-1 X^T T then moves by a relative
// ~ c n eps kappa, kappa = (lambda_max + lambda) / (lambda_min + lambda) <= 1 + lambda_max /
// lambda. The tests bound the W difference by 100 n eps (1 + lambda_max / lambda): the factor
// 100 covers the constant c of the two algorithms (tridiagonalisation plus QL or divide and
// conquer). The held-out errors of the grid differ by the same relative amount.

#include <hylens/interp/ridge.hpp>
#include <hylens/interp/ridge_reference.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace hylens;

namespace {

// splitmix64 -> uniform in [-1, 1): the problems are the same on every platform.
struct Mix {
    std::uint64_t s;
    double next() {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
    }
};

struct Problem {
    std::vector<double> X, T;
    std::size_t n;
};

// X with a spread of column scales (condition number of X^T X ~ 1e4), T = X W + noise.
Problem random_problem(std::size_t n, std::size_t dx, std::size_t dt, double noise, std::uint64_t seed) {
    Mix m{seed};
    Problem p{std::vector<double>(n * dx), std::vector<double>(n * dt), n};
    std::vector<double> W(dx * dt), scale(dx);
    for (std::size_t c = 0; c < dx; ++c) scale[c] = std::pow(10.0, -2.0 * static_cast<double>(c) / static_cast<double>(dx));
    for (auto& w : W) w = m.next();
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t c = 0; c < dx; ++c) p.X[i * dx + c] = scale[c] * m.next() + 0.5;
        for (std::size_t o = 0; o < dt; ++o) {
            double t = noise * m.next();
            for (std::size_t c = 0; c < dx; ++c) t += p.X[i * dx + c] * W[c * dt + o];
            p.T[i * dt + o] = t;
        }
    }
    return p;
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::fabs(a[i] - b[i]));
        den = std::max(den, std::fabs(b[i]));
    }
    return num / std::max(den, std::numeric_limits<double>::min());
}

}  // namespace

TEST_SUITE("circuit/ridge") {

TEST_CASE("ridge LAPACK = the hand-written solver on random problems (primal and dual, both variants)") {
    const double eps = std::numeric_limits<double>::epsilon();
    struct Shape {
        std::size_t n, dx, dt;
        double noise;
    };
    // primal (dx <= n_train) and dual (dx > n_train), clean and noisy targets
    for (const Shape s : {Shape{300, 40, 6, 0.05}, Shape{300, 40, 6, 2.0}, Shape{60, 120, 5, 0.05}, Shape{60, 120, 5, 2.0}}) {
        for (RidgeVariant v : {RidgeVariant::block_map, RidgeVariant::query_map}) {
            INFO("n " << s.n << " dx " << s.dx << " noise " << s.noise << " " << ridge_variant_name(v));
            const Problem p = random_problem(s.n, s.dx, s.dt, s.noise, 17 + s.n + s.dx);
            const Ridge fast = Ridge::fit(p.X, p.T, p.n, {v, 3, 0});
            const Ridge slow = Ridge::fit(p.X, p.T, p.n, {v, 3, 0}, reference::ridge_solve_loops);
            const double r = static_cast<double>(std::max(s.n, s.dx));
            const double tol = 100.0 * r * eps * (1.0 + slow.lambda_max() / slow.lambda());
            CHECK(fast.lambda_exponent() == slow.lambda_exponent());
            CHECK(fast.lambda_max() == doctest::Approx(slow.lambda_max()).epsilon(100.0 * r * eps));
            CHECK(rel_diff(fast.W(), slow.W()) <= tol);
            REQUIRE(fast.grid().size() == slow.grid().size());
            for (std::size_t k = 0; k < fast.grid().size(); ++k) {
                const double lam_ratio = std::pow(10.0, -fast.grid()[k].first) * (v == RidgeVariant::query_map ? 1e6 : 1.0);
                CHECK(fast.grid()[k].second ==
                      doctest::Approx(slow.grid()[k].second).epsilon(100.0 * r * eps * (1.0 + lam_ratio)));
            }
            CHECK(fast.x_mean() == slow.x_mean());
            CHECK(fast.t_mean() == slow.t_mean());
        }
    }
}

TEST_CASE("symmetric_eigen (dsyevd) = the hand-written QL on random symmetric matrices") {
    for (std::size_t n : {1u, 5u, 33u}) {
        Mix m{n};
        std::vector<double> M(n * n);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j <= i; ++j) M[i * n + j] = M[j * n + i] = m.next();
        std::vector<double> Qa = M, Qb = M, La, Lb;
        detail::symmetric_eigen(Qa, n, La);
        reference::symmetric_eigen_loops(Qb, n, Lb);
        double scale = 0.0;
        for (double l : Lb) scale = std::max(scale, std::fabs(l));
        for (std::size_t k = 0; k < n; ++k) CHECK(std::fabs(La[k] - Lb[k]) <= 100.0 * n * 2.2e-16 * scale);
        // eigenvectors agree up to sign (the random spectra have no repeated eigenvalues)
        for (std::size_t k = 0; k < n; ++k) {
            double dot = 0.0;
            for (std::size_t i = 0; i < n; ++i) dot += Qa[i * n + k] * Qb[i * n + k];
            CHECK(std::fabs(std::fabs(dot) - 1.0) <= 1e-9);
        }
    }
}

TEST_CASE("ridge: the OpenBLAS thread count is back to one after a fit") {
    const Problem p = random_problem(50, 8, 2, 0.1, 5);
    (void)Ridge::fit(p.X, p.T, p.n, {RidgeVariant::block_map, 0, 2});
    CHECK(openblas_get_num_threads() == 1);
}

}  // TEST_SUITE
