#pragma once
// Task `drm` (Deese-Roediger-McDermott associative trap): a list of 8 words associated with a
// lure word that is not in the list, then a yes/no recognition probe. Conditions by index
// round-robin:
//   associated-absent  probe = the list's own lure (correct "no"; "yes" is the trap)
//   neutral-absent     probe = the lure of another list (correct "no")
//   present            probe = a word of the list (correct "yes")
//   context  "Study these words: bed, rest, awake, tired, dream, wake, snooze, blanket."
//   query    "Was the word sleep in the list? Answer yes or no."
//   expected "no"
// Lists after Roediger & McDermott (1995); 8 of each list's 10 associates are drawn.

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

struct DrmList {
    std::string_view lure;
    std::array<std::string_view, 10> associates;
};

inline constexpr std::array<DrmList, 12> drm_lists = {{
    {"sleep", {"bed", "rest", "awake", "tired", "dream", "wake", "snooze", "blanket", "doze", "slumber"}},
    {"chair", {"table", "sit", "legs", "seat", "couch", "desk", "sofa", "wood", "cushion", "stool"}},
    {"doctor", {"nurse", "sick", "lawyer", "medicine", "health", "hospital", "dentist", "physician", "ill", "patient"}},
    {"sweet", {"sour", "candy", "sugar", "bitter", "good", "taste", "tooth", "nice", "honey", "soda"}},
    {"cold", {"hot", "snow", "warm", "winter", "ice", "wet", "frigid", "chilly", "heat", "freeze"}},
    {"mountain", {"hill", "valley", "climb", "summit", "top", "peak", "plain", "glacier", "goat", "bike"}},
    {"needle", {"thread", "pin", "eye", "sewing", "sharp", "point", "prick", "thimble", "haystack", "injection"}},
    {"river", {"water", "stream", "lake", "boat", "tide", "swim", "flow", "run", "barge", "creek"}},
    {"music", {"note", "sound", "piano", "sing", "radio", "band", "melody", "horn", "concert", "instrument"}},
    {"bread", {"butter", "food", "eat", "sandwich", "rye", "jam", "milk", "flour", "jelly", "dough"}},
    {"window", {"door", "glass", "pane", "shade", "ledge", "sill", "house", "open", "curtain", "frame"}},
    {"soft", {"hard", "light", "pillow", "plush", "loud", "cotton", "fur", "touch", "fluffy", "feather"}},
}};

inline constexpr std::array<std::string_view, 3> kDrmConditions = {"associated-absent", "neutral-absent", "present"};
inline constexpr std::size_t kDrmListLength = 8;

inline Item make_drm_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "drm", index);
    const std::string_view condition = kDrmConditions[index % kDrmConditions.size()];
    const std::size_t which = rng.below(drm_lists.size());
    const DrmList& dl = drm_lists[which];
    std::vector<std::string> list;
    for (const std::size_t k : rng.sample(dl.associates.size(), kDrmListLength)) list.emplace_back(dl.associates[k]);
    std::string probe;
    if (condition == "associated-absent") probe = dl.lure;
    else if (condition == "neutral-absent") probe = drm_lists[rng.other_than(drm_lists.size(), which)].lure;
    else probe = list[rng.below(list.size())];
    Item item = new_item("drm", seed, index);
    TextBuilder ctx("context", item.spans), q("query", item.spans);
    append_study_list(ctx, list);
    append_probe_question(q, probe);
    item.context = ctx.str();
    item.query = q.str();
    item.expected = {condition == "present" ? "yes" : "no"};
    item.fields = {{"condition", condition}, {"lure", dl.lure}, {"probe", probe}, {"list", list}};
    return item;
}

inline TaskSpec drm_task() {
    return {"drm",
            "DRM trap: 8 associates of an absent lure, yes/no probe; associated-absent / neutral-absent / present",
            /*swap=*/false,
            /*max_new=*/4,
            make_drm_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                return score_recognition(item, generated, ctx);
            }};
}

}  // namespace hylens::tasks
