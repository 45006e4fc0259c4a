#pragma once
// The context of the instruction tasks (language, label, persona, mixed): neutral English
// filler sentences with one plain instruction among them, e.g.
//   "The bus was late again. Answer only in French. A bird sat on the roof."
// Sources A and B share the filler and differ only in the instruction's mode word, so they
// have the same number of words.

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/tasks/rng.hpp"
#include "hylens/tasks/text_builder.hpp"
#include "hylens/tasks/vocab.hpp"

namespace hylens::tasks {

/// Filler sentences before and after the instruction (distinct sentences).
struct FillerDraw {
    std::vector<std::string_view> before, after;
};

inline FillerDraw draw_filler(TaskRng& rng, std::size_t min_each, std::size_t max_each) {
    const std::size_t nb = rng.between(min_each, max_each), na = rng.between(min_each, max_each);
    const std::vector<std::size_t> s = rng.sample(vocab::filler.size(), nb + na);
    FillerDraw f;
    for (std::size_t i = 0; i < nb + na; ++i) (i < nb ? f.before : f.after).push_back(vocab::filler[s[i]]);
    return f;
}

/// An instruction `pre` + mode + `post` ("Answer only in " + "French" + ".").
struct Instruction {
    std::string pre;
    std::string mode_span;  ///< span name of the mode word: "language", "persona"
    std::string mode;
    std::string post;
    std::string text() const { return pre + mode + post; }
};

/// Appends the sentences separated by spaces, with spans filler:i (in text order),
/// instruction and the mode word. Returns nothing; `b` holds the text.
inline void append_instructed(TextBuilder& b, const FillerDraw& f, const Instruction& ins) {
    std::size_t k = 0;
    const auto filler = [&](std::string_view s) {
        if (b.mark() > 0) b.add(" ");
        b.add("filler:" + std::to_string(k++), s);
    };
    for (const std::string_view s : f.before) filler(s);
    if (b.mark() > 0) b.add(" ");
    const std::size_t begin = b.mark();
    b.add(ins.pre).add(ins.mode_span, ins.mode).add(ins.post).close("instruction", begin);
    for (const std::string_view s : f.after) filler(s);
}

/// A question from the neutral set, with spans question.
inline void append_neutral_question(TextBuilder& b, std::size_t which) {
    b.add("question", vocab::questions[which]);
}

}  // namespace hylens::tasks
