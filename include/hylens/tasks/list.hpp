#pragma once
// Task `list`: a numbered list of 4-8 words, the question asks the word at one number.
//   context  "List:\n1. red\n2. owl\n3. pear\n4. fox"
//   query    "What is item #3?"
//   expected "pear"
// Swap source B: the same list with the asked word replaced by another word.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <string>   // std::string
#include <vector>   // std::vector

#include "hylens/tasks/recall_score.hpp"
#include "hylens/tasks/rng.hpp"
#include "hylens/tasks/task.hpp"
#include "hylens/tasks/text_builder.hpp"
#include "hylens/tasks/vocab.hpp"

namespace hylens::tasks {

/// Appends "List:\n1. w1\n2. w2..." with spans list, entry:i (the line "i. w"), item:i (the word); i from 1.
inline void append_list(TextBuilder& b, const std::vector<std::string>& words) {
    const std::size_t begin = b.mark();
    b.add("List:");
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string n = std::to_string(i + 1);
        b.add("\n");
        const std::size_t entry = b.mark();
        b.add(n + ". ").add("item:" + n, words[i]).close("entry:" + n, entry);
    }
    b.close("list", begin);
}

inline Item make_list_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "list", index);
    const std::size_t n = rng.between(4, 8);
    const std::vector<std::size_t> v = rng.sample(vocab::values.size(), n + 1);
    std::vector<std::string> a, b;
    for (std::size_t i = 0; i < n; ++i) a.emplace_back(vocab::values[v[i]]);
    const std::size_t target = rng.below(n);
    b = a;
    b[target] = vocab::values[v[n]];
    Item item = new_item("list", seed, index);
    TextBuilder ctx("context", item.spans), alt("alt_context", item.spans), q("query", item.spans);
    append_list(ctx, a);
    append_list(alt, b);
    const std::string number = std::to_string(target + 1);
    const std::size_t qb = q.mark();
    q.add("What is item #").add("number", number).add("?").close("question", qb);
    item.context = ctx.str();
    item.alt_context = alt.str();
    item.query = q.str();
    item.expected = {a[target]};
    item.alt_expected = {b[target]};
    item.fields = {{"position", target + 1}, {"value", a[target]}, {"alt_value", b[target]}, {"n_items", n}};
    return item;
}

inline TaskSpec list_task() {
    return {"list",
            "numbered list of 4-8 words, asks item #i; exact match (swap: B has another word there)",
            /*swap=*/true,
            /*max_new=*/4,
            make_list_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                return score_recall(item, generated, ctx);
            }};
}

}  // namespace hylens::tasks
