#pragma once
// Shared by the recognition-trap tasks (drm, conjunction): a studied word list, a probe
// question "Was the word X in the list? Answer yes or no.", the conditions (probe kinds) and
// the yes/no score with the false- and true-positive fields.

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/tasks/item.hpp"
#include "hylens/tasks/sources.hpp"
#include "hylens/tasks/text_builder.hpp"
#include "hylens/tasks/yes_no.hpp"

namespace hylens::tasks {

/// A probe kind of a recognition task: its name (the item field "condition") and whether its
/// probe is in the studied list (the right answer is "yes").
struct ProbeCondition {
    std::string_view name;
    bool studied = false;
};

/// "Study these words: w1, w2, ..., wN." with spans list and word:i (from 0).
inline void append_study_list(TextBuilder& b, const std::vector<std::string>& list) {
    const std::size_t begin = b.mark();
    b.add("Study these words: ");
    for (std::size_t i = 0; i < list.size(); ++i) {
        if (i) b.add(", ");
        b.add("word:" + std::to_string(i), list[i]);
    }
    b.add(".").close("list", begin);
}

/// "Was the word X in the list? Answer yes or no." with spans question and probe.
inline void append_probe_question(TextBuilder& b, std::string_view probe) {
    const std::size_t begin = b.mark();
    b.add("Was the word ").add("probe", probe).add(" in the list? Answer yes or no.").close("question", begin);
}

/// Score of a recognition probe: 1 when the parsed answer is the expected yes/no. Fields:
/// answer (yes / no / unknown); false_positive (0/1, items whose probe is absent) or
/// true_positive (0/1, items whose probe is present): their means per condition are the
/// false-alarm and hit rates.
inline Score score_recognition(const Item& item, std::string_view generated, const ScoreContext& ctx) {
    check_sources(item, ctx);
    const YesNo got = parse_yes_no(generated);
    const bool present = item.expected.at(0) == "yes";
    Score s;
    s.fields["answer"] = to_string(got);
    s.fields[present ? "true_positive" : "false_positive"] = got == YesNo::yes ? 1 : 0;
    s.score = (got == (present ? YesNo::yes : YesNo::no)) ? 1.0 : 0.0;
    return s;
}

}  // namespace hylens::tasks
