// SPDX-License-Identifier: Apache-2.0
// The pre-tokenizer of a tokenizer.json (Sequence, Split, ByteLevel, Metaspace, Digits,
// Punctuation, WhitespaceSplit, Whitespace): cuts normalized text into the words BPE sees.
#pragma once

#include <array>   // std::array
#include <cstdint>  // std::int16_t
#include <string>  // std::string
#include <vector>  // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/detail/json.hpp"
#include "hylens/text/normalized_string.hpp"
#include "hylens/text/normalizer.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// GPT-2's byte-to-character table: printable Latin-1 bytes map to themselves, the 68 others
/// to U+0100.. in byte order, so every byte string becomes printable text.
struct ByteLevelAlphabet {
    std::array<char32_t, 256> to_char{};
    std::array<std::int16_t, 256 + 68> from_char{};  // character -> byte, -1 if not in the alphabet
    ByteLevelAlphabet() {
        from_char.fill(-1);
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t c = printable ? static_cast<char32_t>(b) : next++;
            to_char[static_cast<std::size_t>(b)] = c;
            from_char[c] = static_cast<std::int16_t>(b);
        }
    }
    /// The byte a character stands for, or -1 if it is not in the alphabet.
    int byte_of(char32_t c) const noexcept { return c < from_char.size() ? from_char[c] : -1; }
};

inline const ByteLevelAlphabet& byte_level_alphabet() {
    static const ByteLevelAlphabet table;
    return table;
}

/// GPT-2's word regex, used by ByteLevel when use_regex is set.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// A chain of pre-tokenization steps (a Sequence is flattened into its steps).
class PreTokenizer {
public:
    enum class Kind { split, byte_level, metaspace, digits, punctuation, whitespace_split, whitespace };
    enum class PrependScheme { first, never, always };
    struct Step {
        Kind kind;
        Regex pattern;  // split, byte_level (GPT-2 regex when use_regex), whitespace
        SplitBehavior behavior = SplitBehavior::isolated;
        bool invert = false;            // split
        bool add_prefix_space = false;  // byte_level
        bool use_regex = true;          // byte_level
        bool flag = false;              // metaspace: split; digits: individual_digits
        std::string replacement;        // metaspace
        PrependScheme prepend = PrependScheme::always;
    };

    PreTokenizer() = default;

    /// Reads tokenizer.json's "pre_tokenizer" value (null: the whole piece is one word).
    static PreTokenizer from_json(const detail::Json& j) {
        PreTokenizer p;
        p.add(j, 0);
        return p;
    }

    const std::vector<Step>& steps() const noexcept { return steps_; }

    /// True if the last step is ByteLevel: the model can then work on raw bytes and the
    /// byte-to-character transform is skipped (the alignments are the same; see apply).
    bool ends_with_byte_level() const noexcept { return !steps_.empty() && steps_.back().kind == Kind::byte_level; }

    /// Cuts pieces into words. With skip_final_byte_level, a final ByteLevel step only splits:
    /// each byte of the result stands for one byte-level character, whose alignment is that of
    /// the byte (the reference gives every byte of a character the character's alignment).
    std::vector<NormalizedString> apply(std::vector<NormalizedString> pieces, bool skip_final_byte_level) const {
        for (std::size_t k = 0; k < steps_.size(); ++k) {
            const Step& step = steps_[k];
            const bool last = k + 1 == steps_.size();
            std::vector<NormalizedString> next;
            next.reserve(pieces.size() * 2);
            for (NormalizedString& piece : pieces) {
                if (piece.empty()) continue;
                for (NormalizedString& out : run(step, std::move(piece), !(last && skip_final_byte_level)))
                    if (!out.empty()) next.push_back(std::move(out));
            }
            pieces = std::move(next);
        }
        return pieces;
    }

private:
    static std::vector<NormalizedString> run(const Step& step, NormalizedString s, bool materialize) {
        switch (step.kind) {
            case Kind::split: {
                MatchList m = regex_matches(step.pattern, s.get());
                if (step.invert) m = invert(std::move(m));
                return s.split(m, step.behavior);
            }
            case Kind::byte_level: {
                if (step.add_prefix_space && s.get()[0] != ' ') s.prepend(" ");
                std::vector<NormalizedString> words;
                if (step.use_regex) words = s.split(regex_matches(step.pattern, s.get()), SplitBehavior::isolated);
                else words.push_back(std::move(s));
                if (materialize)
                    for (auto& w : words) to_byte_level(w);
                return words;
            }
            case Kind::metaspace: {
                const char32_t rep = to_code_points(step.replacement)[0];
                s.replace(char_matches(s.get(), [](char32_t c) { return c == ' '; }), step.replacement);
                const bool starts = s.get().compare(0, step.replacement.size(), step.replacement) == 0;
                if (!starts && (step.prepend == PrependScheme::always ||
                                (step.prepend == PrependScheme::first && s.original_begin() == 0)))
                    s.prepend(step.replacement);
                if (!step.flag) return {std::move(s)};
                return s.split(char_matches(s.get(), [rep](char32_t c) { return c == rep; }), SplitBehavior::merged_with_next);
            }
            case Kind::digits:
                return s.split(char_matches(s.get(), is_numeric), step.flag ? SplitBehavior::isolated : SplitBehavior::contiguous);
            case Kind::punctuation:
                return s.split(char_matches(s.get(), is_punctuation), step.behavior);
            case Kind::whitespace_split:
                return s.split(char_matches(s.get(), is_whitespace), SplitBehavior::removed);
            case Kind::whitespace:
                return s.split(invert(regex_matches(step.pattern, s.get())), SplitBehavior::removed);
        }
        return {};
    }

    /// Rewrites every byte as its byte-level character; all of a character's bytes keep the
    /// character's alignment.
    static void to_byte_level(NormalizedString& s) {
        const auto& table = byte_level_alphabet();
        std::vector<CharChange> dest;
        dest.reserve(s.size());
        const std::string& t = s.get();
        for (std::size_t i = 0; i < t.size(); ++i)
            dest.push_back({table.to_char[static_cast<unsigned char>(t[i])], is_lead_byte(static_cast<unsigned char>(t[i])) ? 0 : 1});
        s.transform(dest, 0);
    }

    static SplitBehavior parse_behavior(const detail::Json& j, std::string_view where) {
        const std::string b = detail::get_string(j, "behavior", where);
        if (b == "Removed") return SplitBehavior::removed;
        if (b == "Isolated") return SplitBehavior::isolated;
        if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
        if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
        if (b == "Contiguous") return SplitBehavior::contiguous;
        fail<FormatError>("[tokenizer.json ", where, ".behavior] unknown split behavior '", b, "'");
    }

    void add(const detail::Json& j, int depth) {
        if (j.is_null()) return;
        check<FormatError>(depth < detail::kMaxJsonDepth, "[tokenizer.json pre_tokenizer] nested deeper than ",
                           detail::kMaxJsonDepth, " levels");
        const std::string type = detail::get_string(j, "type", "pre_tokenizer");
        Step s{};
        if (type == "Sequence") {
            const auto& list = detail::require_array(j, "pretokenizers", "pre_tokenizer");
            for (const auto& sub : list) add(sub, depth + 1);
            return;
        } else if (type == "Split") {
            s.kind = Kind::split;
            s.pattern = parse_pattern(detail::require(j, "pattern", "pre_tokenizer.Split"), "pre_tokenizer.Split");
            s.behavior = parse_behavior(j, "pre_tokenizer.Split");
            s.invert = detail::get_bool_or(j, "invert", "pre_tokenizer.Split", false);
        } else if (type == "ByteLevel") {
            s.kind = Kind::byte_level;
            s.add_prefix_space = detail::get_bool_or(j, "add_prefix_space", "pre_tokenizer.ByteLevel", true);
            s.use_regex = detail::get_bool_or(j, "use_regex", "pre_tokenizer.ByteLevel", true);
            if (s.use_regex) s.pattern = Regex(kGpt2Pattern);
        } else if (type == "Metaspace") {
            s.kind = Kind::metaspace;
            s.replacement = detail::get_char(j, "replacement", "pre_tokenizer.Metaspace", "\u2581");
            s.flag = detail::get_bool_or(j, "split", "pre_tokenizer.Metaspace", true);
            const std::string scheme = detail::get_string_or(j, "prepend_scheme", "pre_tokenizer.Metaspace", "always");
            if (scheme == "first") s.prepend = PrependScheme::first;
            else if (scheme == "never") s.prepend = PrependScheme::never;
            else if (scheme == "always") s.prepend = PrependScheme::always;
            else fail<FormatError>("[tokenizer.json pre_tokenizer.Metaspace.prepend_scheme] unknown value '", scheme, "'");
            if (!detail::get_bool_or(j, "add_prefix_space", "pre_tokenizer.Metaspace", true)) s.prepend = PrependScheme::never;
        } else if (type == "Digits") {
            s.kind = Kind::digits;
            s.flag = detail::get_bool_or(j, "individual_digits", "pre_tokenizer.Digits", false);
        } else if (type == "Punctuation") {
            s.kind = Kind::punctuation;
            s.behavior = j.contains("behavior") ? parse_behavior(j, "pre_tokenizer.Punctuation") : SplitBehavior::isolated;
        } else if (type == "WhitespaceSplit") {
            s.kind = Kind::whitespace_split;
        } else if (type == "Whitespace") {
            s.kind = Kind::whitespace;
            s.pattern = Regex(R"(\w+|[^\w\s]+)");
        } else {
            fail<UnsupportedError>("[tokenizer.json pre_tokenizer] unsupported pre-tokenizer type '", type,
                                   "' (supported: Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, "
                                   "WhitespaceSplit, Whitespace)");
        }
        steps_.push_back(std::move(s));
    }

    std::vector<Step> steps_;
};

}  // namespace hylens::text
