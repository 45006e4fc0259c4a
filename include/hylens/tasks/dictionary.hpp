#pragma once
// Task `dictionary`: 3-8 key=value pairs, the question asks one key's value.
//   context  "Dictionary: cup=red, lamp=owl, door=pear."
//   query    "What is the value of lamp?"
//   expected "owl"
// Swap source B: the same dictionary with the queried value replaced by another value.

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

/// Appends "Dictionary: k1=v1, k2=v2, ..., kN=vN." with spans dictionary, pair:i, key:i, value:i.
inline void append_dictionary(TextBuilder& b, const std::vector<std::string>& keys, const std::vector<std::string>& values) {
    const std::size_t begin = b.mark();
    b.add("Dictionary: ");
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (i) b.add(", ");
        const std::size_t pair = b.mark();
        b.add("key:" + std::to_string(i), keys[i]).add("=").add("value:" + std::to_string(i), values[i]);
        b.close("pair:" + std::to_string(i), pair);
    }
    b.add(".").close("dictionary", begin);
}

/// Appends "What is the value of KEY?" with spans question and key.
inline void append_value_question(TextBuilder& b, const std::string& key) {
    const std::size_t begin = b.mark();
    b.add("What is the value of ").add("key", key).add("?").close("question", begin);
}

/// A dictionary draw shared by `dictionary` and `mixed`: keys, A's values, the queried
/// position and B's value there (not among A's values).
struct DictionaryDraw {
    std::vector<std::string> keys, values;
    std::size_t target = 0;
    std::string alt_value;
    std::vector<std::string> alt_values() const {
        std::vector<std::string> v = values;
        v[target] = alt_value;
        return v;
    }
};

inline DictionaryDraw draw_dictionary(TaskRng& rng, std::size_t min_pairs, std::size_t max_pairs) {
    DictionaryDraw d;
    const std::size_t n = rng.between(min_pairs, max_pairs);
    for (const std::size_t k : rng.sample(vocab::keys.size(), n)) d.keys.emplace_back(vocab::keys[k]);
    const std::vector<std::size_t> v = rng.sample(vocab::values.size(), n + 1);
    for (std::size_t i = 0; i < n; ++i) d.values.emplace_back(vocab::values[v[i]]);
    d.alt_value = vocab::values[v[n]];
    d.target = rng.below(n);
    return d;
}

inline Item make_dictionary_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "dictionary", index);
    const DictionaryDraw d = draw_dictionary(rng, 3, 8);
    Item item = new_item("dictionary", seed, index);
    TextBuilder ctx("context", item.spans), alt("alt_context", item.spans), q("query", item.spans);
    append_dictionary(ctx, d.keys, d.values);
    append_dictionary(alt, d.keys, d.alt_values());
    append_value_question(q, d.keys[d.target]);
    item.context = ctx.str();
    item.alt_context = alt.str();
    item.query = q.str();
    item.expected = {d.values[d.target]};
    item.alt_expected = {d.alt_value};
    item.fields = {{"key", d.keys[d.target]}, {"value", d.values[d.target]}, {"alt_value", d.alt_value},
                   {"n_pairs", d.keys.size()}, {"position", d.target}};
    return item;
}

inline TaskSpec dictionary_task() {
    return {"dictionary",
            "key=value dictionary (3-8 pairs), asks one key's value; exact match (swap: B has another value)",
            /*swap=*/true,
            /*max_new=*/4,
            make_dictionary_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                return score_recall(item, generated, ctx);
            }};
}

}  // namespace hylens::tasks
