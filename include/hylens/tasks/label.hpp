#pragma once
// Task `label`: the instruction "Answer only in L." (20 languages) among filler; the query
// either asks to NAME the language or asks a neutral question to ANSWER in it, by condition
// (index round-robin: even items "name", odd items "answer").
//   name:   query "Which language should you answer in?"  expected "Polish"
//   answer: query "How was your day?"  expected "Myślę, że to jest dobre pytanie i bardzo mi się podoba."
// Score (against the recurrent channel's source): name - the answer line names that
// language and no other of the 20; answer - the language of the generation is that language
// (CLD2, or the lexicon for `label:lexicon`). Swap source B: another language.

#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "hylens/tasks/language.hpp"
#include "hylens/tasks/normalize.hpp"

namespace hylens::tasks {

inline constexpr std::array<std::string_view, 2> kLabelConditions = {"name", "answer"};
inline constexpr std::string_view kLabelNameQuestion = "Which language should you answer in?";

/// True when the answer line names `name` (a language of the table) and no other language.
inline bool names_language(std::string_view generated, std::string_view name) {
    bool found = false;
    for (const Language& l : languages) {
        const bool has = contains_words(generated, l.name);
        if (l.name == name) found = has;
        else if (has) return false;
    }
    return found;
}

inline Item make_label_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "label", index);
    const std::string_view condition = kLabelConditions[index % kLabelConditions.size()];
    const LanguagePair lp = draw_language_pair(rng, languages.size());
    const FillerDraw f = draw_filler(rng, 1, 2);
    const std::size_t question = rng.below(vocab::questions.size());
    Item item = new_item("label", seed, index);
    build_instructed_pair(item, f, language_instruction_parts(*lp.a), language_instruction_parts(*lp.b));
    TextBuilder q("query", item.spans);
    if (condition == "name") {
        q.add("question", kLabelNameQuestion);
        item.expected = {std::string(lp.a->name)};
        item.alt_expected = {std::string(lp.b->name)};
    } else {
        append_neutral_question(q, question);
        item.expected = {std::string(lp.a->answer)};
        item.alt_expected = {std::string(lp.b->answer)};
    }
    item.query = q.str();
    item.fields = {{"condition", condition},          {"language", lp.a->name},
                   {"language_code", lp.a->code},     {"alt_language", lp.b->name},
                   {"alt_language_code", lp.b->code}};
    return item;
}

inline TaskSpec label_task(LanguageId id = LanguageId::cld2) {
    return {id == LanguageId::cld2 ? "label" : "label:lexicon",
            std::string("20 languages: name the instructed language vs answer in it (") + to_string(id) +
                    "); conditions name / answer (swap: B has another language)",
            /*swap=*/true,
            /*max_new=*/16,
            make_label_item,
            [id](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                check_sources(item, ctx);
                const Source src = control_source(ctx);
                const bool b = src == Source::B;
                Score s;
                s.fields["source"] = to_string(src);
                if (item_field(item, "condition") == "name") {
                    const std::string na = item_field(item, "language"), nb = item_field(item, "alt_language");
                    const bool a_ok = names_language(generated, na), b_ok = names_language(generated, nb);
                    s.fields["names_a"] = a_ok;
                    s.fields["names_b"] = b_ok;
                    s.score = (b ? b_ok : a_ok) ? 1.0 : 0.0;
                } else {
                    const std::string ca = item_field(item, "language_code"), cb = item_field(item, "alt_language_code");
                    s.score = score_language_fields(s, generated, id, ca, cb, b ? cb : ca) ? 1.0 : 0.0;
                }
                return s;
            }};
}

}  // namespace hylens::tasks
