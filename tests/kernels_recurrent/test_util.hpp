#pragma once
// Helpers shared by the recurrent-kernel tests: random fills, the relative error used by the
// twin comparisons, and the golden manifest.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "golden_reader.hpp"
#include "../support/nan_max.hpp"

namespace rtest {

inline std::vector<float> randn(std::size_t n, std::mt19937& rng, float scale = 1.0f, float mean = 0.0f) {
    std::normal_distribution<float> nd(mean, scale);
    std::vector<float> v(n);
    for (auto& e : v) e = nd(rng);
    return v;
}

inline std::vector<float> uniform(std::size_t n, std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> ud(lo, hi);
    std::vector<float> v(n);
    for (auto& e : v) e = ud(rng);
    return v;
}

/// max |a - b| over n values at strides (for views into wider rows).
inline double max_abs_diff(const float* a, const float* b, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m = hylens::test::nan_max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

/// max |a - b| / max(1, max |b|): the "relative" error of the twin comparisons.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double mb = 1.0;
    for (float v : b) mb = std::max(mb, double(std::fabs(v)));
    return max_abs_diff(a.data(), b.data(), a.size()) / mb;
}

inline nlohmann::json kernel_manifest() {
    std::ifstream f(std::string(HYLENS_GOLDEN_DIR) + "/kernels/manifest.json");
    REQUIRE(f.good());
    return nlohmann::json::parse(f);
}

inline std::string golden_path(const std::string& rel) { return std::string(HYLENS_GOLDEN_DIR) + "/kernels/" + rel; }

}  // namespace rtest
