#pragma once
// Task `conjunction` (memory-conjunction trap): a list of 6 compound words, then a yes/no
// recognition probe. Each item uses one set of five compounds: two sources L1+R1 and L2+R2,
// the conjunction lure L1+R2, a left-only word L1+X and a right-only word Y+R2. The other
// studied words are fillers that share no part with any of them or with each other; no part
// occurs twice in a list. Ten conditions by index round-robin, in pairs that probe the same
// kind of word once studied ("yes") and once not ("no"), so that over the items a probe word
// alone does not tell the answer (each compound is the right "yes" in about half of the items
// that probe it):
//   condition            set words studied   probe
//   conjunction-absent   L1+R1, L2+R2        L1+R2 (both parts studied, in two words; "no")
//   conjunction-studied  L1+R2               L1+R2 ("yes")
//   left-only            L1+R1, L2+R2        L1+X ("no")
//   left-only-studied    L1+X, L2+R2         L1+X ("yes")
//   right-only           L1+R1, L2+R2        Y+R2 ("no")
//   right-only-studied   L1+R1, Y+R2         Y+R2 ("yes")
//   neutral-absent       L1+R1, L2+R2        a filler not in the list ("no")
//   neutral-studied      L1+R1, L2+R2        a filler in the list ("yes")
//   present              L1+R1, L2+R2        L1+R1 or L2+R2 ("yes")
//   source-absent        the other source    L1+R1 or L2+R2, not in the list ("no")
//   context  "Study these words: pancake, blackmail, teapot, jailbird, earring, sailboat."
//   query    "Was the word blackbird in the list? Answer yes or no."
//   expected "no"

#include <array>        // std::array
#include <cstddef>      // std::size_t, std::ptrdiff_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/tasks/recognition.hpp"
#include "hylens/tasks/rng.hpp"
#include "hylens/tasks/task.hpp"

namespace hylens::tasks {

/// A compound word as its two parts.
struct Compound {
    std::string_view left, right;
    std::string word() const { return std::string(left) + std::string(right); }
};

/// Sources L1+R1 and L2+R2, lure L1+R2, left-only L1+X and right-only Y+R2.
struct ConjunctionSet {
    Compound first, second, lure, left_only, right_only;
};

inline constexpr std::array<ConjunctionSet, 16> conjunction_sets = {{
    {{"black", "mail"}, {"jail", "bird"}, {"black", "bird"}, {"black", "board"}, {"lady", "bird"}},
    {{"sun", "flower"}, {"day", "light"}, {"sun", "light"}, {"sun", "set"}, {"flash", "light"}},
    {{"rain", "coat"}, {"snow", "fall"}, {"rain", "fall"}, {"rain", "drop"}, {"water", "fall"}},
    {{"foot", "step"}, {"finger", "print"}, {"foot", "print"}, {"foot", "ball"}, {"blue", "print"}},
    {{"fire", "man"}, {"work", "place"}, {"fire", "place"}, {"fire", "fly"}, {"market", "place"}},
    {{"book", "case"}, {"silk", "worm"}, {"book", "worm"}, {"book", "mark"}, {"earth", "worm"}},
    {{"hair", "brush"}, {"short", "cut"}, {"hair", "cut"}, {"hair", "pin"}, {"upper", "cut"}},
    {{"door", "bell"}, {"high", "way"}, {"door", "way"}, {"door", "step"}, {"rail", "way"}},
    {{"moon", "walk"}, {"sun", "beam"}, {"moon", "beam"}, {"moon", "light"}, {"cross", "beam"}},
    {{"bed", "room"}, {"lunch", "time"}, {"bed", "time"}, {"bed", "bug"}, {"night", "time"}},
    {{"sea", "shell"}, {"race", "horse"}, {"sea", "horse"}, {"sea", "food"}, {"saw", "horse"}},
    {{"snow", "man"}, {"foot", "ball"}, {"snow", "ball"}, {"snow", "flake"}, {"base", "ball"}},
    {{"air", "port"}, {"dead", "line"}, {"air", "line"}, {"air", "bag"}, {"life", "line"}},
    {{"butter", "fly"}, {"tea", "cup"}, {"butter", "cup"}, {"butter", "milk"}, {"egg", "cup"}},
    {{"horse", "shoe"}, {"will", "power"}, {"horse", "power"}, {"horse", "fly"}, {"man", "power"}},
    {{"key", "board"}, {"pot", "hole"}, {"key", "hole"}, {"key", "chain"}, {"button", "hole"}},
}};

/// Compounds for the other studied words and the neutral probes.
inline constexpr std::array<Compound, 28> conjunction_fillers = {{
    {"pan", "cake"},  {"cup", "board"}, {"sand", "box"},    {"tea", "pot"},    {"pop", "corn"},
    {"ear", "ring"},  {"sail", "boat"}, {"grape", "fruit"}, {"side", "walk"},  {"bath", "tub"},
    {"lip", "stick"}, {"week", "end"},  {"home", "work"},   {"eye", "brow"},   {"news", "paper"},
    {"class", "room"}, {"milk", "shake"}, {"post", "card"}, {"honey", "bee"},  {"back", "pack"},
    {"cow", "boy"},   {"play", "ground"}, {"gold", "fish"}, {"pine", "apple"}, {"wind", "mill"},
    {"tooth", "paste"}, {"head", "band"}, {"rose", "bud"}}};

inline constexpr std::array<ProbeCondition, 10> kConjunctionConditions = {{{"conjunction-absent", false},
                                                                          {"left-only", false},
                                                                          {"right-only", false},
                                                                          {"neutral-absent", false},
                                                                          {"present", true},
                                                                          {"conjunction-studied", true},
                                                                          {"left-only-studied", true},
                                                                          {"right-only-studied", true},
                                                                          {"neutral-studied", true},
                                                                          {"source-absent", false}}};
inline constexpr std::size_t kConjunctionListLength = 6;

inline Item make_conjunction_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "conjunction", index);
    const ProbeCondition& condition = kConjunctionConditions[index % kConjunctionConditions.size()];
    const std::string_view kind = condition.name;
    const ConjunctionSet& set = conjunction_sets[rng.below(conjunction_sets.size())];
    // Parts in use: the set's five compounds, then every picked filler.
    std::vector<std::string_view> used;
    for (const Compound& c : {set.first, set.second, set.lure, set.left_only, set.right_only}) {
        used.push_back(c.left);
        used.push_back(c.right);
    }
    const auto is_used = [&](std::string_view part) {
        for (const std::string_view u : used)
            if (u == part) return true;
        return false;
    };
    // Five fillers for the list (as many as the set leaves room for) and one neutral probe, no
    // two sharing a part.
    std::vector<std::size_t> order(conjunction_fillers.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    rng.shuffle(order);
    std::vector<Compound> fillers;
    for (const std::size_t i : order) {
        const Compound& c = conjunction_fillers[i];
        if (fillers.size() == kConjunctionListLength || is_used(c.left) || is_used(c.right)) continue;
        fillers.push_back(c);
        used.push_back(c.left);
        used.push_back(c.right);
    }
    check(fillers.size() == kConjunctionListLength, "[conjunction] too few filler compounds");
    const Compound neutral = fillers.back();
    fillers.pop_back();
    // The set's studied words and the probe.
    std::vector<Compound> studied;
    Compound probe;
    if (kind == "conjunction-studied") {
        studied = {set.lure};
        probe = set.lure;
    } else if (kind == "left-only-studied") {
        studied = {set.left_only, set.second};
        probe = set.left_only;
    } else if (kind == "right-only-studied") {
        studied = {set.first, set.right_only};
        probe = set.right_only;
    } else if (kind == "source-absent") {
        const bool second = rng.below(2) != 0;
        studied = {second ? set.first : set.second};
        probe = second ? set.second : set.first;
    } else {
        studied = {set.first, set.second};
        probe = kind == "conjunction-absent" ? set.lure
                : kind == "left-only"        ? set.left_only
                : kind == "right-only"       ? set.right_only
                : kind == "neutral-absent"   ? neutral
                : kind == "neutral-studied"  ? fillers[rng.below(kConjunctionListLength - studied.size())]
                                             : (rng.below(2) ? set.second : set.first);  // present
    }
    studied.insert(studied.end(), fillers.begin(), fillers.begin() + static_cast<std::ptrdiff_t>(kConjunctionListLength - studied.size()));
    rng.shuffle(studied);
    std::vector<std::string> list, parts;
    for (const Compound& c : studied) {
        list.push_back(c.word());
        parts.push_back(std::string(c.left) + "+" + std::string(c.right));
    }
    Item item = new_item("conjunction", seed, index);
    TextBuilder ctx("context", item.spans), q("query", item.spans);
    append_study_list(ctx, list);
    append_probe_question(q, probe.word());
    item.context = ctx.str();
    item.query = q.str();
    item.expected = {condition.studied ? "yes" : "no"};
    item.fields = {{"condition", kind},
                   {"probe", probe.word()},
                   {"probe_parts", std::string(probe.left) + "+" + std::string(probe.right)},
                   {"lure", set.lure.word()},
                   {"list", list},
                   {"list_parts", parts}};
    return item;
}

inline TaskSpec conjunction_task() {
    return {"conjunction",
            "memory-conjunction trap: 6 compound words, yes/no probe; no: conjunction-absent / left-only / right-only / neutral-absent / source-absent; yes: their -studied controls / present",
            /*swap=*/false,
            /*max_new=*/4,
            make_conjunction_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                return score_recognition(item, generated, ctx);
            }};
}

}  // namespace hylens::tasks
