#pragma once
// Task `conjunction` (memory-conjunction trap): a list of 6 compound words, then a yes/no
// recognition probe. Each item uses one set of five compounds: two studied sources L1+R1 and
// L2+R2, the conjunction lure L1+R2, a left-only word L1+X and a right-only word Y+R2. The
// other four studied words share no part with any of them or with each other.
// Conditions by index round-robin:
//   conjunction-absent  probe = L1+R2 (both parts studied, in two different words; "no")
//   left-only           probe = L1+X ("no")
//   right-only          probe = Y+R2 ("no")
//   neutral-absent      probe = a compound sharing no part with the list ("no")
//   present             probe = L1+R1 or L2+R2 ("yes")
//   context  "Study these words: pancake, blackmail, teapot, jailbird, earring, sailboat."
//   query    "Was the word blackbird in the list? Answer yes or no."
//   expected "no"

#include <array>        // std::array
#include <cstddef>      // std::size_t
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

inline constexpr std::array<std::string_view, 5> kConjunctionConditions = {
    "conjunction-absent", "left-only", "right-only", "neutral-absent", "present"};
inline constexpr std::size_t kConjunctionListLength = 6;

inline Item make_conjunction_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "conjunction", index);
    const std::string_view condition = kConjunctionConditions[index % kConjunctionConditions.size()];
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
    // Four fillers for the list and one neutral probe, no two sharing a part.
    std::vector<std::size_t> order(conjunction_fillers.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    rng.shuffle(order);
    std::vector<Compound> picked;
    for (const std::size_t i : order) {
        const Compound& c = conjunction_fillers[i];
        if (picked.size() == kConjunctionListLength - 1 || is_used(c.left) || is_used(c.right)) continue;
        picked.push_back(c);
        used.push_back(c.left);
        used.push_back(c.right);
    }
    check(picked.size() == kConjunctionListLength - 1, "[conjunction] too few filler compounds");
    const Compound neutral = picked.back();
    picked.pop_back();
    std::vector<Compound> studied = picked;
    studied.push_back(set.first);
    studied.push_back(set.second);
    rng.shuffle(studied);
    const Compound probe = condition == "conjunction-absent" ? set.lure
                           : condition == "left-only"        ? set.left_only
                           : condition == "right-only"       ? set.right_only
                           : condition == "neutral-absent"   ? neutral
                                                             : (rng.below(2) ? set.second : set.first);
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
    item.expected = {condition == "present" ? "yes" : "no"};
    item.fields = {{"condition", condition},
                   {"probe", probe.word()},
                   {"probe_parts", std::string(probe.left) + "+" + std::string(probe.right)},
                   {"lure", set.lure.word()},
                   {"list", list},
                   {"list_parts", parts}};
    return item;
}

inline TaskSpec conjunction_task() {
    return {"conjunction",
            "memory-conjunction trap: 6 compound words, yes/no probe; conjunction-absent / left-only / right-only / neutral-absent / present",
            /*swap=*/false,
            /*max_new=*/4,
            make_conjunction_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                return score_recognition(item, generated, ctx);
            }};
}

}  // namespace hylens::tasks
