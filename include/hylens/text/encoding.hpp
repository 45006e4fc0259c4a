// SPDX-License-Identifier: Apache-2.0
// Encoding: the token ids of a text and each token's character span in that text.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int32_t
#include <vector>   // std::vector

namespace hylens {

/// A half-open range [begin, end) of characters (Unicode code points) of the encoded text.
struct CharSpan {
    std::size_t begin = 0, end = 0;
    bool operator==(const CharSpan&) const = default;
};

/// The result of Tokenizer::encode. ids[i] is the i-th token; offsets[i] the characters of
/// the input it covers (as the Hugging Face tokenizers library reports them: a byte token
/// inside a multi-byte character covers the whole character, special tokens added by the
/// post-processor cover [0, 0)).
struct Encoding {
    std::vector<std::int32_t> ids;
    std::vector<CharSpan> offsets;

    std::size_t size() const noexcept { return ids.size(); }
    bool empty() const noexcept { return ids.empty(); }
};

/// Positions of the tokens that overlap the character span (a token belongs to a span if the
/// two share at least one character), in increasing order. Empty spans overlap nothing.
inline std::vector<std::size_t> span_to_positions(const Encoding& enc, CharSpan span) {
    std::vector<std::size_t> out;
    if (span.begin >= span.end) return out;
    for (std::size_t i = 0; i < enc.offsets.size(); ++i) {
        const CharSpan& t = enc.offsets[i];
        if (t.begin < span.end && span.begin < t.end) out.push_back(i);
    }
    return out;
}

}  // namespace hylens
