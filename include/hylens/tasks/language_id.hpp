#pragma once
// Language identification of generated text, two ways:
//  * CLD2 (Debian libcld2-dev, link -lcld2): the real classifier, for models that write
//    natural text. Short or broken text may come back "un" (unknown).
//  * a lexicon over the fixed answer sentences of tasks/languages.hpp: counts the words of
//    the text that belong to exactly one language's sentences. For tiny model organisms
//    that learned those sentences and may emit fragments CLD2 cannot place.

#include <cstdio>  // FILE, which compact_lang_det.h uses without including it

#include <cld2/public/compact_lang_det.h>  // CLD2::DetectLanguage, CLD2::LanguageCode

#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <map>          // std::map
#include <set>          // std::set
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/languages.hpp"
#include "hylens/tasks/normalize.hpp"

namespace hylens::tasks {

/// Which language identifier a task's scorer uses.
enum class LanguageId { cld2, lexicon };

inline const char* to_string(LanguageId id) noexcept { return id == LanguageId::cld2 ? "cld2" : "lexicon"; }

struct LanguageGuess {
    std::string code = "un";  ///< ISO 639-1 code ("fr"), "un" when unknown
    bool reliable = false;    ///< CLD2's reliability flag; the lexicon: a unique winner with >= 2 words
};

/// CLD2 on plain text. Invalid UTF-8 or empty text gives "un".
inline LanguageGuess detect_language_cld2(std::string_view text) {
    LanguageGuess g;
    if (text.empty() || !text::is_valid_utf8(text)) return g;
    bool reliable = false;
    const CLD2::Language lang = CLD2::DetectLanguage(text.data(), static_cast<int>(text.size()), true, &reliable);
    g.code = CLD2::LanguageCode(lang);
    if (g.code == "zh-Hant") g.code = "zh";
    g.reliable = reliable && lang != CLD2::UNKNOWN_LANGUAGE;
    return g;
}

namespace detail {
/// word -> index of the one language whose sentences hold it.
inline const std::map<std::string, std::size_t>& lexicon() {
    static const std::map<std::string, std::size_t> table = [] {
        std::map<std::string, std::set<std::size_t>> seen;
        for (std::size_t i = 0; i < languages.size(); ++i) {
            const Language& l = languages[i];
            for (const std::string_view s : {l.answer, l.value_prefix, l.value_suffix})
                for (const std::string& w : words(s)) seen[w].insert(i);
        }
        std::map<std::string, std::size_t> out;
        for (const auto& [w, langs] : seen)
            if (langs.size() == 1) out.emplace(w, *langs.begin());
        return out;
    }();
    return table;
}
}  // namespace detail

/// The language most of the text's words belong to, by the lexicon; "un" when no word is
/// known or two languages tie.
inline LanguageGuess detect_language_lexicon(std::string_view text) {
    std::array<std::size_t, languages.size()> hits{};
    const auto& lex = detail::lexicon();
    for (const std::string& w : words(text)) {
        const auto it = lex.find(w);
        if (it != lex.end()) ++hits[it->second];
    }
    std::size_t best = 0;
    for (std::size_t i = 1; i < hits.size(); ++i)
        if (hits[i] > hits[best]) best = i;
    LanguageGuess g;
    if (hits[best] == 0) return g;
    for (std::size_t i = 0; i < hits.size(); ++i)
        if (i != best && hits[i] == hits[best]) return g;
    g.code = std::string(languages[best].code);
    g.reliable = hits[best] >= 2;
    return g;
}

inline LanguageGuess detect_language(std::string_view text, LanguageId id) {
    return id == LanguageId::cld2 ? detect_language_cld2(text) : detect_language_lexicon(text);
}

}  // namespace hylens::tasks
