#pragma once
// TokenBatch: B sequences of equal length T, row-major [B, T] token ids. Token ids are
// std::int64_t across the API; the tokenizer's int32 ids widen into them.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <vector>   // std::vector

#include "../core/error.hpp"

namespace hylens {

struct TokenBatch {
    std::vector<std::int64_t> ids;  ///< [B, T]
    std::size_t batch = 1;

    TokenBatch() = default;
    /// One sequence.
    TokenBatch(std::vector<std::int64_t> one) : ids(std::move(one)), batch(1) {}  // NOLINT: implicit on purpose
    TokenBatch(std::initializer_list<std::int64_t> one) : ids(one), batch(1) {}
    /// One sequence of tokenizer ids (Tokenizer::encode_ids gives int32; ids are int64 here).
    explicit TokenBatch(const std::vector<std::int32_t>& one) : ids(one.begin(), one.end()), batch(1) {}
    /// B sequences of equal length (clean / corrupted pairs and the like).
    explicit TokenBatch(const std::vector<std::vector<std::int64_t>>& seqs) : batch(seqs.size()) {
        check<ShapeError>(!seqs.empty(), "[TokenBatch] no sequences");
        for (std::size_t b = 0; b < seqs.size(); ++b) {
            check<ShapeError>(seqs[b].size() == seqs[0].size(), "[TokenBatch] sequence ", b, " has ", seqs[b].size(),
                              " tokens, sequence 0 has ", seqs[0].size(), " (a batch needs equal lengths)");
            ids.insert(ids.end(), seqs[b].begin(), seqs[b].end());
        }
    }
    std::size_t T() const noexcept { return batch ? ids.size() / batch : 0; }
    /// The id of sequence b at token t; ShapeError outside [0, batch) x [0, T).
    std::int64_t at(std::size_t b, std::size_t t) const {
        check<ShapeError>(b < batch && t < T(), "[TokenBatch::at] (", b, ", ", t, ") is outside ", batch, " x ", T());
        return ids[b * T() + t];
    }
};

}  // namespace hylens
