// SPDX-License-Identifier: Apache-2.0
// NormalizedString: a piece of the input as normalized so far, with the original byte range of
// every normalized byte, so that tokens can be mapped back to the user's characters.
#pragma once

#include <algorithm>    // std::min
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// Original byte range [begin, end) of the input that one normalized byte comes from.
struct Alignment {
    std::uint32_t begin = 0, end = 0;
    bool operator==(const Alignment&) const = default;
};

/// One normalized character as produced by a transformation, with the Hugging Face `change`
/// convention: 0 replaces the next original character, +1 is inserted, -n replaces the next
/// character and removes the n after it.
struct CharChange {
    char32_t c;
    int change;
};

/// How the delimiter of a split is kept (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

/// A match list covering a whole string: ranges in order, each flagged as a match or not.
using MatchList = std::vector<std::pair<std::pair<std::size_t, std::size_t>, bool>>;

/// The normalized text of one piece of the input and, for each of its bytes, the range of the
/// original input it comes from (absolute byte offsets into the whole input). The operations
/// reproduce the alignment rules of the Hugging Face tokenizers library (tokenizers/src/
/// tokenizer/normalizer.rs), which decide every token's offsets.
class NormalizedString {
public:
    NormalizedString() = default;

    /// The piece [begin, end) of the input `whole`, not yet normalized.
    NormalizedString(std::string_view whole, std::size_t begin, std::size_t end)
        : text_(whole.substr(begin, end - begin)), orig_begin_(begin), orig_end_(end) {
        align_.resize(text_.size());
        std::size_t i = 0;
        while (i < text_.size()) {
            const std::size_t n = std::min(utf8_length(static_cast<unsigned char>(text_[i])), text_.size() - i);
            for (std::size_t k = 0; k < n; ++k)
                align_[i + k] = {static_cast<std::uint32_t>(begin + i), static_cast<std::uint32_t>(begin + i + n)};
            i += n;
        }
    }

    const std::string& get() const noexcept { return text_; }
    bool empty() const noexcept { return text_.empty(); }
    std::size_t size() const noexcept { return text_.size(); }
    const std::vector<Alignment>& alignments() const noexcept { return align_; }
    /// The original byte range this piece covers.
    std::size_t original_begin() const noexcept { return orig_begin_; }
    std::size_t original_end() const noexcept { return orig_end_; }

    /// Original byte range of the normalized bytes [b, e) (b < e).
    std::pair<std::size_t, std::size_t> original_range(std::size_t b, std::size_t e) const noexcept {
        return {align_[b].begin, align_[e - 1].end};
    }

    /// The normalized bytes [b, e) as a new piece (b, e on character boundaries).
    NormalizedString slice(std::size_t b, std::size_t e) const {
        NormalizedString out;
        out.text_ = text_.substr(b, e - b);
        out.align_.assign(align_.begin() + static_cast<std::ptrdiff_t>(b), align_.begin() + static_cast<std::ptrdiff_t>(e));
        if (b < e) {
            out.orig_begin_ = align_[b].begin;
            out.orig_end_ = align_[e - 1].end;
        } else {
            out.orig_begin_ = out.orig_end_ = orig_begin_ + b;
        }
        return out;
    }

    /// Replaces the normalized bytes [b, e) by the characters of dest, following the
    /// `change` convention; initial_removed characters at the start of the range are dropped.
    void transform_range(std::size_t b, std::size_t e, const std::vector<CharChange>& dest, std::size_t initial_removed) {
        // Byte sizes of the characters being replaced, consumed as the changes are applied.
        std::vector<std::size_t> old_sizes;
        for (std::size_t i = b; i < e;) {
            const std::size_t n = utf8_length(static_cast<unsigned char>(text_[i]));
            old_sizes.push_back(n);
            i += n;
        }
        std::size_t next_old = 0;
        std::size_t offset = b;
        for (; next_old < initial_removed && next_old < old_sizes.size(); ++next_old) offset += old_sizes[next_old];

        std::string new_text;
        std::vector<Alignment> new_align;
        new_text.reserve(e - b + dest.size());
        new_align.reserve(e - b + dest.size());
        for (const auto& [c, change] : dest) {
            Alignment a{};
            if (change > 0) {
                // An inserted character shares the alignment of the byte before it.
                if (offset >= 1) a = align_[offset - 1];
            } else {
                check<Error>(offset < align_.size(), "[normalizer] transformation runs past the string");
                a = align_[offset];
                if (next_old < old_sizes.size()) offset += old_sizes[next_old++];
                for (int r = 0; r < -change && next_old < old_sizes.size(); ++r) offset += old_sizes[next_old++];
            }
            const std::size_t before = new_text.size();
            append_utf8(new_text, c);
            new_align.insert(new_align.end(), new_text.size() - before, a);
        }
        text_.replace(b, e - b, new_text);
        align_.erase(align_.begin() + static_cast<std::ptrdiff_t>(b), align_.begin() + static_cast<std::ptrdiff_t>(e));
        align_.insert(align_.begin() + static_cast<std::ptrdiff_t>(b), new_align.begin(), new_align.end());
    }

    void transform(const std::vector<CharChange>& dest, std::size_t initial_removed) {
        transform_range(0, text_.size(), dest, initial_removed);
    }

    /// Applies a Unicode normalization form, tracking alignments as the reference does: each
    /// input character becomes its decomposition (the first character replaces it, the others
    /// are insertions), combining marks are put in canonical order, and when a character is
    /// composed into the starter before it, the starter takes over its change (an original
    /// character absorbed by a composite is a removal).
    void normalize(NormalForm form) {
        bool ascii = true;
        for (const char ch : text_) ascii &= static_cast<unsigned char>(ch) < 0x80;
        if (ascii) return;  // every form leaves ASCII unchanged
        const std::string whole = normalize_form(text_, form);
        if (whole == text_) return;
        const bool compat = form == NormalForm::nfkc || form == NormalForm::nfkd;
        const bool compose = form == NormalForm::nfc || form == NormalForm::nfkc;
        struct Item {
            char32_t c;
            int change;
            int ccc;
        };
        std::vector<Item> seq;
        for (const char32_t cp : to_code_points(text_)) {
            utf8proc_int32_t buf[32];
            utf8proc_int32_t last_boundclass = 0;
            const auto opts = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0));
            const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 32, opts, &last_boundclass);
            check<Error>(n > 0 && n <= 32, "[unicode normalize] cannot decompose U+", static_cast<unsigned long>(cp));
            for (utf8proc_ssize_t k = 0; k < n; ++k) {
                const auto c = static_cast<char32_t>(buf[k]);
                seq.push_back({c, k == 0 ? 0 : 1, utf8proc_get_property(buf[k])->combining_class});
            }
        }
        for (std::size_t i = 1; i < seq.size(); ++i)  // canonical ordering (stable)
            for (std::size_t k = i; k > 0 && seq[k].ccc != 0 && seq[k - 1].ccc > seq[k].ccc; --k) std::swap(seq[k], seq[k - 1]);
        std::vector<Item> out;
        if (compose) {
            std::ptrdiff_t starter = -1;
            int between = -1;  // largest combining class between the starter and here, -1 if none
            for (const Item& x : seq) {
                const bool blocked = between >= 0 && (x.ccc == 0 || between >= x.ccc);
                if (starter >= 0 && !blocked) {
                    if (const char32_t comp = compose_pair(out[static_cast<std::size_t>(starter)].c, x.c)) {
                        out[static_cast<std::size_t>(starter)].c = comp;
                        out[static_cast<std::size_t>(starter)].change += x.change - 1;
                        continue;
                    }
                }
                if (x.ccc == 0) starter = static_cast<std::ptrdiff_t>(out.size()), between = -1;
                else between = std::max(between, x.ccc);
                out.push_back(x);
            }
        } else {
            out = std::move(seq);
        }
        std::vector<CharChange> dest;
        std::string check_text;
        for (const Item& x : out) {
            dest.push_back({x.c, x.change});
            append_utf8(check_text, x.c);
        }
        if (check_text != whole) {
            // Not expected; keep the text right and align position by position.
            dest.clear();
            const auto cps = to_code_points(whole);
            const std::size_t n_in = count_chars(text_);
            for (std::size_t k = 0; k < cps.size(); ++k)
                dest.push_back({cps[k], k >= n_in ? 1 : (k + 1 == cps.size() && cps.size() < n_in) ? -static_cast<int>(n_in - cps.size()) : 0});
        }
        transform(dest, 0);
    }

    /// Replaces every match (a list from a Pattern) by content; the new characters share the
    /// alignment of the last byte of what they replace.
    void replace(const MatchList& matches, std::string_view content) {
        std::string new_text;
        std::vector<Alignment> new_align;
        new_text.reserve(text_.size());
        new_align.reserve(text_.size());
        for (const auto& [range, is_match] : matches) {
            const auto [b, e] = range;
            if (!is_match) {
                new_text.append(text_, b, e - b);
                new_align.insert(new_align.end(), align_.begin() + static_cast<std::ptrdiff_t>(b),
                                 align_.begin() + static_cast<std::ptrdiff_t>(e));
                continue;
            }
            const Alignment a = e >= 1 ? align_[e - 1] : Alignment{};
            new_text.append(content);
            new_align.insert(new_align.end(), content.size(), a);
        }
        text_ = std::move(new_text);
        align_ = std::move(new_align);
    }

    /// Prepends s; its characters take the alignment of the current first character. Does
    /// nothing on an empty string.
    void prepend(std::string_view s) {
        if (text_.empty() || s.empty()) return;
        const Alignment a = align_[0];
        text_.insert(0, s);
        align_.insert(align_.begin(), s.size(), a);
    }

    /// Removes leading and/or trailing White_Space characters.
    void strip(bool left, bool right) {
        const auto cps = to_code_points(text_);
        std::size_t lead = 0, trail = 0;
        if (left)
            while (lead < cps.size() && is_whitespace(cps[lead])) ++lead;
        if (right)
            while (trail < cps.size() - lead && is_whitespace(cps[cps.size() - 1 - trail])) ++trail;
        if (lead == 0 && trail == 0) return;
        std::size_t b = 0, e = text_.size();
        for (std::size_t k = 0; k < lead; ++k) b += utf8_size(cps[k]);
        for (std::size_t k = 0; k < trail; ++k) e -= utf8_size(cps[cps.size() - 1 - k]);
        text_ = text_.substr(b, e - b);
        align_.erase(align_.begin() + static_cast<std::ptrdiff_t>(e), align_.end());
        align_.erase(align_.begin(), align_.begin() + static_cast<std::ptrdiff_t>(b));
    }

    /// Splits along a match list with the given delimiter behaviour; empty pieces are dropped.
    std::vector<NormalizedString> split(const MatchList& matches, SplitBehavior behavior) const {
        std::vector<std::pair<std::size_t, std::size_t>> ranges;  // pieces to keep
        switch (behavior) {
            case SplitBehavior::isolated:
                for (const auto& m : matches) ranges.push_back(m.first);
                break;
            case SplitBehavior::removed:
                for (const auto& m : matches)
                    if (!m.second) ranges.push_back(m.first);
                break;
            case SplitBehavior::contiguous: {
                bool prev = false;
                for (const auto& [r, is_match] : matches) {
                    if (is_match == prev && !ranges.empty()) ranges.back().second = r.second;
                    else ranges.push_back(r);
                    prev = is_match;
                }
                break;
            }
            case SplitBehavior::merged_with_previous: {
                bool prev = false;
                for (const auto& [r, is_match] : matches) {
                    if (is_match && !prev && !ranges.empty()) ranges.back().second = r.second;
                    else ranges.push_back(r);
                    prev = is_match;
                }
                break;
            }
            case SplitBehavior::merged_with_next: {
                bool prev = false;
                for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
                    const auto& [r, is_match] = *it;
                    if (is_match && !prev && !ranges.empty()) ranges.back().first = r.first;
                    else ranges.push_back(r);
                    prev = is_match;
                }
                std::reverse(ranges.begin(), ranges.end());
                break;
            }
        }
        std::vector<NormalizedString> out;
        out.reserve(ranges.size());
        for (const auto& [b, e] : ranges)
            if (b < e) out.push_back(slice(b, e));
        return out;
    }

private:
    /// The primary composite of (a, b), or 0 if they do not compose.
    static char32_t compose_pair(char32_t a, char32_t b) {
        constexpr char32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
        constexpr char32_t l_count = 19, v_count = 21, t_count = 28, n_count = v_count * t_count;
        if (a >= l_base && a < l_base + l_count && b >= v_base && b < v_base + v_count)  // Hangul L + V
            return s_base + ((a - l_base) * v_count + (b - v_base)) * t_count;
        if (a >= s_base && a < s_base + l_count * n_count && (a - s_base) % t_count == 0 && b > t_base &&
            b < t_base + t_count)  // Hangul LV + T
            return a + (b - t_base);
        if (b < 0x300 || !is_composable_second(b)) return 0;
        std::string pair;
        append_utf8(pair, a);
        append_utf8(pair, b);
        const auto cps = to_code_points(normalize_form(pair, NormalForm::nfc));
        return cps.size() == 1 ? cps[0] : 0;
    }

    std::string text_;
    std::vector<Alignment> align_;  // one per byte of text_
    std::size_t orig_begin_ = 0, orig_end_ = 0;
};

/// Match list of a regex over s: every match and every gap between matches, in order.
inline MatchList regex_matches(const Regex& re, std::string_view s) {
    MatchList out;
    if (s.empty()) return out;
    std::size_t prev = 0;
    re.for_each_match(s, [&](std::size_t b, std::size_t e) {
        if (prev != b) out.push_back({{prev, b}, false});
        out.push_back({{b, e}, true});
        prev = e;
    });
    if (prev != s.size()) out.push_back({{prev, s.size()}, false});
    return out;
}

/// Match list of a character predicate over valid UTF-8 s: each matching character alone.
template <class Pred>
MatchList char_matches(std::string_view s, Pred&& pred) {
    MatchList out;
    std::size_t last = 0, pos = 0;
    while (pos < s.size()) {
        const std::size_t b = pos;
        const char32_t c = decode_utf8(s, pos);
        if (pred(c)) {
            if (last < b) out.push_back({{last, b}, false});
            out.push_back({{b, pos}, true});
            last = pos;
        }
    }
    if (last < s.size()) out.push_back({{last, s.size()}, false});
    return out;
}

/// Flips the match flags (the `invert` option of Split).
inline MatchList invert(MatchList m) {
    for (auto& x : m) x.second = !x.second;
    return m;
}

}  // namespace hylens::text
