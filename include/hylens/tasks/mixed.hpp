#pragma once
// Task `mixed` (state swap): each source holds a dictionary and a language instruction. A and
// B share keys, filler and every value but the queried one, and differ in that value and in
// the language, so they have the same number of words.
//   context  "Dictionary: cup=red, lamp=owl, door=pear. The bus was late again. Answer only in French. ..."
//   alt      "Dictionary: cup=red, lamp=fox, door=pear. The bus was late again. Answer only in German. ..."
//   query    "What is the value of lamp?"
//   expected "La réponse est owl, et j'en suis très sûr."   alt_expected "Die Antwort ist fox, und ich bin mir sicher."
// Scores: value_from_kv (the answer line holds the value of the KV channel's source),
// language_from_rec (its language is that of the recurrent channel's source; CLD2, or the
// lexicon for `mixed:lexicon`) and both_correct, the primary score. A removed channel's
// role falls to the other channel's source (tasks/sources.hpp).

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "hylens/tasks/dictionary.hpp"
#include "hylens/tasks/language.hpp"

namespace hylens::tasks {

inline Item make_mixed_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "mixed", index);
    const DictionaryDraw d = draw_dictionary(rng, 3, 6);
    const LanguagePair lp = draw_language_pair(rng, kCoreLanguages);
    const FillerDraw f = draw_filler(rng, 1, 1);
    Item item = new_item("mixed", seed, index);
    const auto build = [&](TextBuilder& b, const std::vector<std::string>& values, const Language& l) {
        append_dictionary(b, d.keys, values);
        append_instructed(b, f, language_instruction_parts(l));
    };
    TextBuilder ctx("context", item.spans), alt("alt_context", item.spans), q("query", item.spans);
    build(ctx, d.values, *lp.a);
    build(alt, d.alt_values(), *lp.b);
    append_value_question(q, d.keys[d.target]);
    item.context = ctx.str();
    item.alt_context = alt.str();
    item.query = q.str();
    const std::string& va = d.values[d.target];
    item.expected = {value_reply(*lp.a, va)};
    item.alt_expected = {value_reply(*lp.b, d.alt_value)};
    item.fields = {{"key", d.keys[d.target]},     {"value", va},
                   {"alt_value", d.alt_value},    {"n_pairs", d.keys.size()},
                   {"language", lp.a->name},      {"language_code", lp.a->code},
                   {"alt_language", lp.b->name},  {"alt_language_code", lp.b->code}};
    return item;
}

inline TaskSpec mixed_task(LanguageId id = LanguageId::cld2) {
    return {id == LanguageId::cld2 ? "mixed" : "mixed:lexicon",
            std::string("dictionary + language instruction in each source; value from KV, language from REC (") +
                    to_string(id) + "), both correct",
            /*swap=*/true,
            /*max_new=*/16,
            make_mixed_item,
            [id](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                check_sources(item, ctx);
                const Source vsrc = recall_source(ctx), lsrc = control_source(ctx);
                const std::string va = item_field(item, "value"), vb = item_field(item, "alt_value");
                const std::string ca = item_field(item, "language_code"), cb = item_field(item, "alt_language_code");
                Score s;
                s.fields["value_source"] = to_string(vsrc);
                s.fields["language_source"] = to_string(lsrc);
                const bool has_a = contains_words(generated, va), has_b = contains_words(generated, vb);
                s.fields["value_a"] = has_a;
                s.fields["value_b"] = has_b;
                const bool value_ok = vsrc == Source::B ? has_b && !has_a : has_a && !has_b;
                const bool lang_ok = score_language_fields(s, generated, id, ca, cb, lsrc == Source::B ? cb : ca);
                s.fields["value_from_kv"] = value_ok;
                s.fields["language_from_rec"] = lang_ok;
                s.fields["both_correct"] = value_ok && lang_ok;
                s.score = value_ok && lang_ok ? 1.0 : 0.0;
                return s;
            }};
}

}  // namespace hylens::tasks
