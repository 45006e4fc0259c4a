#pragma once
// Text normalisation shared by the scorers: the answer line of a generation, lower-cased and
// trimmed of surrounding whitespace and punctuation, and its words.

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <utf8proc.h>  // utf8proc_tolower

#include "hylens/text/unicode.hpp"

namespace hylens::tasks {

namespace detail {
inline char32_t lower(char32_t cp) noexcept {
    return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}
/// Characters written without spaces between words (Han, kana): each is a word of its own.
constexpr bool is_ideographic(char32_t cp) noexcept {
    return (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
           (cp >= 0xF900 && cp <= 0xFAFF);
}
inline bool is_trimmed(char32_t cp) noexcept {
    return text::is_whitespace(cp) || text::is_punctuation(cp) || cp == '*' || cp == '`' || cp == '$' ||
           cp == '<' || cp == '>' || cp == '|';
}
}  // namespace detail

/// The answer line of a generation: the first line with a word character (a model often goes
/// on after its answer with a new line).
inline std::string_view answer_line(std::string_view generated) {
    std::size_t pos = 0;
    while (pos <= generated.size()) {
        const std::size_t nl = generated.find('\n', pos);
        const std::string_view line = generated.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        std::size_t p = 0;
        while (p < line.size())
            if (text::is_word_char(text::decode_utf8(line, p))) return line;
        if (nl == std::string_view::npos) break;
        pos = nl + 1;
    }
    return {};
}

/// Normalised answer: the answer line, lower-cased, runs of whitespace made one space,
/// whitespace and punctuation (also * ` $ < > |) removed at both ends.
inline std::string normalize_answer(std::string_view generated) {
    const std::vector<char32_t> cps = text::to_code_points(answer_line(generated));
    std::size_t b = 0, e = cps.size();
    while (b < e && detail::is_trimmed(cps[b])) ++b;
    while (e > b && detail::is_trimmed(cps[e - 1])) --e;
    std::string out;
    bool space = false;
    for (std::size_t i = b; i < e; ++i) {
        if (text::is_whitespace(cps[i])) {
            space = true;
            continue;
        }
        if (space) out += ' ';
        space = false;
        text::append_utf8(out, detail::lower(cps[i]));
    }
    return out;
}

/// Lower-cased words of a text: runs of word characters; each Han or kana character is a word.
inline std::vector<std::string> words(std::string_view s) {
    std::vector<std::string> out;
    std::string cur;
    const auto flush = [&] {
        if (!cur.empty()) out.push_back(std::move(cur));
        cur.clear();
    };
    std::size_t pos = 0;
    while (pos < s.size()) {
        const char32_t cp = text::decode_utf8(s, pos);
        if (detail::is_ideographic(cp)) {
            flush();
            text::append_utf8(cur, cp);
            flush();
        } else if (text::is_word_char(cp) && cp != '_') {
            text::append_utf8(cur, detail::lower(cp));
        } else {
            flush();
        }
    }
    flush();
    return out;
}

/// Number of words, as the generators count them (A and B sources have equal counts).
inline std::size_t word_count(std::string_view s) { return words(s).size(); }

/// True when the normalised answer equals one of the normalised accepted answers.
inline bool exact_match(std::string_view generated, const std::vector<std::string>& accepted) {
    const std::string got = normalize_answer(generated);
    if (got.empty()) return false;
    for (const std::string& a : accepted)
        if (got == normalize_answer(a)) return true;
    return false;
}

/// True when the words of `phrase` occur consecutively among the words of the answer line.
inline bool contains_words(std::string_view generated, std::string_view phrase) {
    const std::vector<std::string> hay = words(answer_line(generated)), needle = words(phrase);
    if (needle.empty() || needle.size() > hay.size()) return false;
    for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
        std::size_t k = 0;
        while (k < needle.size() && hay[i + k] == needle[k]) ++k;
        if (k == needle.size()) return true;
    }
    return false;
}

}  // namespace hylens::tasks
