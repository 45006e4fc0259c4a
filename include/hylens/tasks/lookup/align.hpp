#pragma once
// Token alignment across two tokenizers reading the same text in their own chat formats
// (protocols.md §A.4.7, C.2 `align`). Each token gets a canonical span (segment, begin, end)
// relative to the segments both prompts share, the user message and the assistant prefill
// (or one whole segment for a plain text chunk); a token not wholly inside a segment, such as
// a wrapper token, gets none. Two positions are aligned when their canonical spans are equal.

#include <cstddef>   // std::size_t
#include <map>       // std::map
#include <optional>  // std::optional
#include <tuple>     // std::tie
#include <utility>   // std::pair
#include <vector>    // std::vector

#include "hylens/text/encoding.hpp"

namespace hylens::tasks::lookup {

struct CanonicalSpan {
    std::size_t segment = 0, begin = 0, end = 0;  ///< characters relative to the segment start
    bool operator==(const CanonicalSpan&) const = default;
    bool operator<(const CanonicalSpan& o) const {
        return std::tie(segment, begin, end) < std::tie(o.segment, o.begin, o.end);
    }
};

/// The canonical span of every token of `enc` against `segments` (character spans of the
/// encoded text, in segment-id order); empty tokens and tokens outside every segment get none.
inline std::vector<std::optional<CanonicalSpan>> canonical_spans(const Encoding& enc, const std::vector<CharSpan>& segments) {
    std::vector<std::optional<CanonicalSpan>> out(enc.size());
    for (std::size_t i = 0; i < enc.size(); ++i) {
        const CharSpan t = enc.offsets[i];
        if (t.end <= t.begin) continue;
        for (std::size_t s = 0; s < segments.size(); ++s)
            if (segments[s].begin <= t.begin && t.end <= segments[s].end)
                out[i] = CanonicalSpan{s, t.begin - segments[s].begin, t.end - segments[s].begin};
    }
    return out;
}

/// Pairs (i in A, j in B) of positions whose canonical spans are equal, in A's order.
inline std::vector<std::pair<std::size_t, std::size_t>> align(const std::vector<std::optional<CanonicalSpan>>& a,
                                                              const std::vector<std::optional<CanonicalSpan>>& b) {
    std::map<CanonicalSpan, std::size_t> in_b;
    for (std::size_t j = 0; j < b.size(); ++j)
        if (b[j]) in_b.emplace(*b[j], j);
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i]) {
            const auto it = in_b.find(*a[i]);
            if (it != in_b.end()) out.push_back({i, it->second});
        }
    return out;
}

}  // namespace hylens::tasks::lookup
