#pragma once
// The tasks' own random numbers: splitmix64 seeded from (seed, stream name, item index), so
// item `index` of a task is generated on its own (no need to generate the items before it) and
// is the same on every machine and standard library (no std::*_distribution anywhere).

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string_view>  // std::string_view
#include <utility>      // std::swap
#include <vector>       // std::vector

namespace hylens::tasks {

/// splitmix64's output function: a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// FNV-1a over the bytes of a name: separates the streams of different tasks.
constexpr std::uint64_t fnv1a64(std::string_view s) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    return h;
}

/// A splitmix64 generator for one item of one task.
class TaskRng {
public:
    TaskRng(std::uint64_t seed, std::string_view stream, std::uint64_t index) noexcept
        : state_(mix64(mix64(fnv1a64(stream) ^ mix64(seed)) ^ (index * 0x9e3779b97f4a7c15ULL + 1))) {}

    std::uint64_t next() noexcept {
        state_ += 0x9e3779b97f4a7c15ULL;
        return mix64(state_);
    }

    /// Uniform integer in [0, n), unbiased (rejection of the short top range); n > 0.
    std::size_t below(std::size_t n) noexcept {
        const std::uint64_t bound = static_cast<std::uint64_t>(n);
        const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod n
        for (;;) {
            const std::uint64_t r = next();
            if (r >= threshold) return static_cast<std::size_t>(r % bound);
        }
    }

    /// Uniform integer in [lo, hi], lo <= hi.
    std::size_t between(std::size_t lo, std::size_t hi) noexcept { return lo + below(hi - lo + 1); }

    /// Fisher-Yates shuffle.
    template <class T>
    void shuffle(std::vector<T>& v) noexcept {
        for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
    }

    /// k distinct indices of [0, n) in random order (k <= n).
    std::vector<std::size_t> sample(std::size_t n, std::size_t k) {
        std::vector<std::size_t> all(n);
        for (std::size_t i = 0; i < n; ++i) all[i] = i;
        for (std::size_t i = 0; i < k; ++i) std::swap(all[i], all[i + below(n - i)]);
        all.resize(k);
        return all;
    }

    /// An index of [0, n) different from `not_this` (n >= 2).
    std::size_t other_than(std::size_t n, std::size_t not_this) noexcept {
        const std::size_t r = below(n - 1);
        return r >= not_this ? r + 1 : r;
    }

private:
    std::uint64_t state_;
};

}  // namespace hylens::tasks
