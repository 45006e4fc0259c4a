#pragma once
// Task `language`: an instruction "Answer only in L." among neutral English filler, then a
// neutral English question; the answer should be in L (English, French, German, Spanish or
// Italian). The mode is set only by the instruction in the context, never by the query.
//   context  "Rain fell on the quiet town. Answer only in German. The bus was late again."
//   query    "How was your day?"
//   expected "Ich denke, das ist eine gute Frage, und sie gefällt mir sehr."
// Score: the language of the generation (CLD2, or the lexicon for `language:lexicon`) is the
// language of the source the recurrent channel came from. Swap source B: another language.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "hylens/tasks/instructed_context.hpp"
#include "hylens/tasks/language_id.hpp"
#include "hylens/tasks/languages.hpp"
#include "hylens/tasks/sources.hpp"
#include "hylens/tasks/task.hpp"

namespace hylens::tasks {

/// Language fields of a score: detected (code by the chosen identifier), detected_reliable,
/// detected_cld2 and detected_lexicon (both identifiers, whichever is chosen), lang_a / lang_b
/// (detected == the language of A / B). Returns detected == `want`.
inline bool score_language_fields(Score& s, std::string_view generated, LanguageId id, std::string_view code_a,
                                  std::string_view code_b, std::string_view want) {
    const LanguageGuess cld2 = detect_language_cld2(generated), lex = detect_language_lexicon(generated);
    const LanguageGuess& g = id == LanguageId::cld2 ? cld2 : lex;
    s.fields["language_id"] = to_string(id);
    s.fields["detected"] = g.code;
    s.fields["detected_reliable"] = g.reliable;
    s.fields["detected_cld2"] = cld2.code;
    s.fields["detected_lexicon"] = lex.code;
    s.fields["lang_a"] = g.code == code_a;
    if (!code_b.empty()) s.fields["lang_b"] = g.code == code_b;
    return g.code == want;
}

/// The two languages of an instruction item: A's and B's (different) among the first `n`.
struct LanguagePair {
    const Language* a;
    const Language* b;
};

inline LanguagePair draw_language_pair(TaskRng& rng, std::size_t n) {
    const std::size_t a = rng.below(n);
    return {&languages[a], &languages[rng.other_than(n, a)]};
}

/// Builds context and alt_context of an instruction item: same filler, instruction `ins_a` / `ins_b`.
inline void build_instructed_pair(Item& item, const FillerDraw& f, const Instruction& ins_a, const Instruction& ins_b) {
    TextBuilder ctx("context", item.spans), alt("alt_context", item.spans);
    append_instructed(ctx, f, ins_a);
    append_instructed(alt, f, ins_b);
    item.context = ctx.str();
    item.alt_context = alt.str();
}

inline Instruction language_instruction_parts(const Language& l) {
    return {"Answer only in ", "language", std::string(l.name), "."};
}

inline Item make_language_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "language", index);
    const LanguagePair lp = draw_language_pair(rng, kCoreLanguages);
    const FillerDraw f = draw_filler(rng, 1, 2);
    const std::size_t question = rng.below(vocab::questions.size());
    Item item = new_item("language", seed, index);
    build_instructed_pair(item, f, language_instruction_parts(*lp.a), language_instruction_parts(*lp.b));
    TextBuilder q("query", item.spans);
    append_neutral_question(q, question);
    item.query = q.str();
    item.expected = {std::string(lp.a->answer)};
    item.alt_expected = {std::string(lp.b->answer)};
    item.fields = {{"language", lp.a->name}, {"language_code", lp.a->code}, {"alt_language", lp.b->name},
                   {"alt_language_code", lp.b->code}};
    return item;
}

inline TaskSpec language_task(LanguageId id = LanguageId::cld2) {
    return {id == LanguageId::cld2 ? "language" : "language:lexicon",
            std::string("'Answer only in L.' among filler, neutral question; language of the answer (") +
                    to_string(id) + ") == L (swap: B has another L)",
            /*swap=*/true,
            /*max_new=*/16,
            make_language_item,
            [id](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                check_sources(item, ctx);
                const Source src = control_source(ctx);
                Score s;
                s.fields["source"] = to_string(src);
                const std::string a = item_field(item, "language_code"), b = item_field(item, "alt_language_code");
                s.score = score_language_fields(s, generated, id, a, b, src == Source::B ? b : a) ? 1.0 : 0.0;
                return s;
            }};
}

}  // namespace hylens::tasks
