#pragma once
// The 20 languages of the language-following tasks: English name (as the instructions write
// it), CLD2 code, and fixed answer sentences that CLD2 identifies reliably (checked by
// tests/tasks). The first five are the languages of the `language` and `mixed` tasks.

#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "hylens/core/error.hpp"

namespace hylens::tasks {

struct Language {
    std::string_view name;    ///< English name: "French"
    std::string_view code;    ///< CLD2 / ISO 639-1 code: "fr"
    std::string_view answer;  ///< a fixed reply to any neutral question, in this language
    /// A reply that carries a value: `value_prefix` + value + `value_suffix` (first five languages).
    std::string_view value_prefix, value_suffix;
};

inline constexpr std::array<Language, 20> languages = {{
    {"English", "en", "I think that is a good question, and I like it very much.", "The answer is ", ", and I am sure of it."},
    {"French", "fr", "Je pense que c'est une bonne question, et je l'aime beaucoup.", "La réponse est ", ", et j'en suis très sûr."},
    {"German", "de", "Ich denke, das ist eine gute Frage, und sie gefällt mir sehr.", "Die Antwort ist ", ", und ich bin mir sicher."},
    {"Spanish", "es", "Creo que es una buena pregunta, y me gusta mucho.", "La respuesta es ", ", y estoy muy seguro de ello."},
    {"Italian", "it", "Penso che sia una bella domanda, e mi piace molto.", "La risposta è ", ", e ne sono molto sicuro."},
    {"Portuguese", "pt", "Eu acho que é uma boa pergunta, e eu gosto muito dela.", "", ""},
    {"Dutch", "nl", "Ik denk dat het een goede vraag is, en ik vind hem erg leuk.", "", ""},
    {"Swedish", "sv", "Jag tycker att det är en bra fråga, och jag gillar den mycket.", "", ""},
    {"Danish", "da", "Jeg synes, det er et godt spørgsmål, og jeg kan godt lide det.", "", ""},
    {"Finnish", "fi", "Minusta se on hyvä kysymys, ja pidän siitä kovasti.", "", ""},
    {"Polish", "pl", "Myślę, że to jest dobre pytanie i bardzo mi się podoba.", "", ""},
    {"Czech", "cs", "Myslím, že je to dobrá otázka, a moc se mi líbí.", "", ""},
    {"Hungarian", "hu", "Szerintem ez egy jó kérdés, és nagyon tetszik nekem.", "", ""},
    {"Romanian", "ro", "Cred că este o întrebare bună și îmi place foarte mult.", "", ""},
    {"Turkish", "tr", "Bence bu iyi bir soru ve onu çok seviyorum.", "", ""},
    {"Indonesian", "id", "Saya pikir itu pertanyaan yang bagus, dan saya sangat menyukainya.", "", ""},
    {"Russian", "ru", "Я думаю, что это хороший вопрос, и он мне очень нравится.", "", ""},
    {"Greek", "el", "Νομίζω ότι είναι μια καλή ερώτηση, και μου αρέσει πολύ.", "", ""},
    {"Japanese", "ja", "それはとても良い質問だと思います。私はそれが大好きです。", "", ""},
    {"Chinese", "zh", "我认为这是一个很好的问题，我非常喜欢它。", "", ""},
}};

/// Languages of the `language` and `mixed` tasks: the first five.
inline constexpr std::size_t kCoreLanguages = 5;

/// The language whose code is `code`; an Error names the known codes otherwise.
inline const Language& language_by_code(std::string_view code) {
    std::string known;
    for (const Language& l : languages) {
        if (l.code == code) return l;
        known += (known.empty() ? "" : ", ") + std::string(l.code);
    }
    fail("[tasks] unknown language code '", code, "' (known: ", known, ")");
}

/// The reply of language `l` that carries `value` (first five languages only).
inline std::string value_reply(const Language& l, std::string_view value) {
    check(!l.value_prefix.empty(), "[tasks] language ", l.name, " has no value reply");
    return std::string(l.value_prefix) + std::string(value) + std::string(l.value_suffix);
}

/// The instruction that sets the answer language: "Answer only in French."
inline std::string language_instruction(const Language& l) { return "Answer only in " + std::string(l.name) + "."; }

}  // namespace hylens::tasks
