#pragma once
// The scorer of the recall tasks (dictionary, list): exact match of the normalised answer
// line against the answer of the source the KV channel came from (tasks/sources.hpp).
// First-token match needs the tokenizer: the runner computes it against expected[0] /
// alt_expected[0] and adds it to the record.

#include <string_view>  // std::string_view

#include "hylens/tasks/item.hpp"
#include "hylens/tasks/normalize.hpp"
#include "hylens/tasks/sources.hpp"

namespace hylens::tasks {

/// Score fields: source (whose answer is scored), answer (normalised answer line),
/// exact_a / contains_a (exact match / whole-word containment of A's answer), and for items
/// with a B source exact_b, contains_b and follows ("A", "B", "neither").
inline Score score_recall(const Item& item, std::string_view generated, const ScoreContext& ctx) {
    check_sources(item, ctx);
    const Source src = recall_source(ctx);
    Score s;
    const bool exact_a = exact_match(generated, item.expected);
    s.fields["source"] = to_string(src);
    s.fields["answer"] = normalize_answer(generated);
    s.fields["exact_a"] = exact_a;
    s.fields["contains_a"] = contains_words(generated, item.expected.at(0));
    bool exact_b = false;
    if (!item.alt_expected.empty()) {
        exact_b = exact_match(generated, item.alt_expected);
        s.fields["exact_b"] = exact_b;
        s.fields["contains_b"] = contains_words(generated, item.alt_expected.at(0));
        s.fields["follows"] = exact_a ? "A" : exact_b ? "B" : "neither";
    }
    s.score = (src == Source::B ? exact_b : exact_a) ? 1.0 : 0.0;
    return s;
}

}  // namespace hylens::tasks
