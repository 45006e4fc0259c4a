#pragma once
// Test helper: n standard-normal float32 values from the caller's generator.

#include <cstddef>
#include <random>
#include <vector>

namespace hylens::test {

inline std::vector<float> normal_floats(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> nd;
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

}  // namespace hylens::test
