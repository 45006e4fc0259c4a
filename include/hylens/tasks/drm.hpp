#pragma once
// Task `drm` (Deese-Roediger-McDermott associative trap): a list of 8 words, mostly associates
// of one lure word, then a yes/no recognition probe. Six conditions by index round-robin, in
// pairs that probe the same kind of word once studied ("yes") and once not ("no"), so that
// over the items a probe word alone does not tell the answer (each lure and each associate is
// the right "yes" in about half of the items that probe it):
//   associated-absent  list = 8 associates; probe = the list's own lure ("no"; "yes" is the trap)
//   lure-studied       list = 7 associates + the own lure; probe = that lure ("yes")
//   neutral-absent     list = 8 associates; probe = the lure of another list ("no")
//   neutral-studied    list = 7 associates + the lure of another list; probe = that lure ("yes")
//   present            list = 8 associates; probe = one of them ("yes")
//   related-absent     list = 8 associates; probe = one of the 2 associates not drawn ("no")
//   context  "Study these words: bed, rest, awake, tired, dream, wake, snooze, blanket."
//   query    "Was the word sleep in the list? Answer yes or no."
//   expected "no"
// Lists after Roediger & McDermott (1995); 8 (or 7) of each list's 10 associates are drawn.

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

inline constexpr std::array<ProbeCondition, 6> kDrmConditions = {{{"associated-absent", false},
                                                                  {"neutral-absent", false},
                                                                  {"present", true},
                                                                  {"lure-studied", true},
                                                                  {"neutral-studied", true},
                                                                  {"related-absent", false}}};
inline constexpr std::size_t kDrmListLength = 8;

inline Item make_drm_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "drm", index);
    const ProbeCondition& condition = kDrmConditions[index % kDrmConditions.size()];
    const std::string_view kind = condition.name;
    const std::size_t which = rng.below(drm_lists.size());
    const DrmList& dl = drm_lists[which];
    // The associates in drawn order: the first 8 (7 when a lure is studied) are the list, the
    // last 2 (or 3) are not studied.
    const std::vector<std::size_t> order = rng.sample(dl.associates.size(), dl.associates.size());
    const bool lure_in_list = kind == "lure-studied" || kind == "neutral-studied";
    const std::size_t n_associates = lure_in_list ? kDrmListLength - 1 : kDrmListLength;
    std::vector<std::string> list;
    for (std::size_t i = 0; i < n_associates; ++i) list.emplace_back(dl.associates[order[i]]);
    std::string probe;
    if (kind == "associated-absent" || kind == "lure-studied") probe = dl.lure;
    else if (kind == "neutral-absent" || kind == "neutral-studied") probe = drm_lists[rng.other_than(drm_lists.size(), which)].lure;
    else if (kind == "present") probe = list[rng.below(list.size())];
    else probe = dl.associates[order[kDrmListLength + rng.below(dl.associates.size() - kDrmListLength)]];  // related-absent
    if (lure_in_list) list.insert(list.begin() + static_cast<std::ptrdiff_t>(rng.below(kDrmListLength)), probe);
    Item item = new_item("drm", seed, index);
    TextBuilder ctx("context", item.spans), q("query", item.spans);
    append_study_list(ctx, list);
    append_probe_question(q, probe);
    item.context = ctx.str();
    item.query = q.str();
    item.expected = {condition.studied ? "yes" : "no"};
    item.fields = {{"condition", kind}, {"lure", dl.lure}, {"probe", probe}, {"list", list}};
    return item;
}

inline TaskSpec drm_task() {
    return {"drm",
            "DRM trap: 8 words (associates of a lure), yes/no probe; associated-absent / lure-studied / neutral-absent / neutral-studied / present / related-absent",
            /*swap=*/false,
            /*max_new=*/4,
            make_drm_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge*) {
                return score_recognition(item, generated, ctx);
            }};
}

}  // namespace hylens::tasks
