#pragma once
// Test helper: reproducible random token ids (one sequence, or a batch of equal lengths).

#include <hylens/stack/tokens.hpp>

#include <cstdint>
#include <random>
#include <vector>

namespace hylens::test {

inline std::vector<std::int64_t> random_ids(std::size_t n, std::size_t vocab, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::int64_t> v(n);
    for (auto& id : v) id = static_cast<std::int64_t>(rng() % vocab);
    return v;
}

inline TokenBatch random_batch(std::size_t B, std::size_t T, std::size_t vocab, unsigned seed) {
    std::vector<std::vector<std::int64_t>> seqs;
    for (std::size_t b = 0; b < B; ++b) seqs.push_back(random_ids(T, vocab, seed * 1000u + static_cast<unsigned>(b)));
    return TokenBatch(seqs);
}

}  // namespace hylens::test
