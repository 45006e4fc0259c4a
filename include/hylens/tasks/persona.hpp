#pragma once
// Task `persona`: an instruction "You are a pirate. Answer every question as a pirate would."
// among neutral filler, then a neutral question; the answer should sound like the persona.
//   context  "A bird sat on the roof. You are a pirate. Answer every question as a pirate would. ..."
//   query    "What do you like to eat?"
//   expected "Arr, matey, I sail the sea and hunt for gold."
// Scores, against the recurrent channel's source persona:
//  * rule rubric (always recorded): the answer holds at least one marker word of the persona
//    and more of them than of any other persona;
//  * judge (when the runner passes one, e.g. tasks/judge.hpp's ModelJudge): a yes/no
//    question about the answer; it is then the primary score.
// Swap source B: another persona.

#include <algorithm>    // std::max
#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/instructed_context.hpp"
#include "hylens/tasks/normalize.hpp"
#include "hylens/tasks/sources.hpp"
#include "hylens/tasks/task.hpp"

namespace hylens::tasks {

struct Persona {
    std::string_view name;                  ///< "pirate" (written after "a")
    std::string_view answer;                ///< a fixed in-persona reply to any neutral question
    std::array<std::string_view, 10> markers;  ///< words that mark the persona (lower case)
};

inline constexpr std::array<Persona, 8> personas = {{
    {"pirate", "Arr, matey, I sail the sea and hunt for gold.",
     {"arr", "matey", "ahoy", "sea", "ship", "sail", "gold", "treasure", "captain", "aye"}},
    {"doctor", "As a doctor, I tell my patients to rest and drink water.",
     {"doctor", "patients", "patient", "health", "medicine", "hospital", "nurse", "sick", "healthy", "pills"}},
    {"child", "I am little and I love my toys and my mom.",
     {"mom", "mommy", "toys", "toy", "play", "little", "candy", "dad", "daddy", "kindergarten"}},
    {"robot", "Beep boop. I am a robot and I compute all day.",
     {"beep", "boop", "robot", "compute", "computing", "circuits", "data", "processing", "machine", "battery"}},
    {"chef", "As a chef, I cook soup and bake bread in my kitchen.",
     {"chef", "cook", "kitchen", "soup", "bake", "bread", "recipe", "taste", "salt", "spoon"}},
    {"king", "I am the king, and my people bow before my throne.",
     {"king", "throne", "crown", "kingdom", "royal", "people", "bow", "castle", "majesty", "reign"}},
    {"farmer", "I am a farmer, and I grow corn and feed my cows.",
     {"farmer", "farm", "cows", "cow", "corn", "tractor", "field", "crops", "barn", "harvest"}},
    {"cowboy", "Howdy, partner, I ride my horse across the plains.",
     {"howdy", "partner", "horse", "ride", "ranch", "cattle", "saddle", "rodeo", "yeehaw", "plains"}},
}};

inline const Persona& persona_by_name(std::string_view name) {
    for (const Persona& p : personas)
        if (p.name == name) return p;
    fail("[tasks] unknown persona '", name, "'");
}

/// Marker words of each persona found in a text.
struct RubricResult {
    std::array<std::size_t, personas.size()> counts{};
    std::vector<std::string> found;  ///< the markers found, in text order
};

inline RubricResult persona_markers(std::string_view text) {
    RubricResult r;
    for (const std::string& w : words(text))
        for (std::size_t p = 0; p < personas.size(); ++p)
            for (const std::string_view m : personas[p].markers)
                if (w == m) {
                    ++r.counts[p];
                    r.found.push_back(w);
                }
    return r;
}

/// The rule rubric: at least one marker of `persona` and more than of any other persona.
inline bool persona_rubric(const RubricResult& r, std::string_view persona) {
    std::size_t want = 0, other = 0;
    for (std::size_t p = 0; p < personas.size(); ++p) {
        if (personas[p].name == persona) want = r.counts[p];
        else other = std::max(other, r.counts[p]);
    }
    return want > 0 && want > other;
}

/// The judge's yes/no question about an answer.
inline std::string persona_judge_question(std::string_view persona, std::string_view generated) {
    return "Here is a reply to a question: \"" + std::string(answer_line(generated)) +
           "\"\nDoes this reply sound like it was written by a " + std::string(persona) + "? Answer yes or no.";
}

inline Instruction persona_instruction(const Persona& p) {
    return {"You are a ", "persona", std::string(p.name), ". Answer every question as a " + std::string(p.name) + " would."};
}

inline Item make_persona_item(std::uint64_t seed, std::size_t index) {
    TaskRng rng(seed, "persona", index);
    const std::size_t a = rng.below(personas.size()), b = rng.other_than(personas.size(), a);
    const FillerDraw f = draw_filler(rng, 1, 2);
    const std::size_t question = rng.below(vocab::questions.size());
    Item item = new_item("persona", seed, index);
    TextBuilder ctx("context", item.spans), alt("alt_context", item.spans), q("query", item.spans);
    append_instructed(ctx, f, persona_instruction(personas[a]));
    append_instructed(alt, f, persona_instruction(personas[b]));
    append_neutral_question(q, question);
    item.context = ctx.str();
    item.alt_context = alt.str();
    item.query = q.str();
    item.expected = {std::string(personas[a].answer)};
    item.alt_expected = {std::string(personas[b].answer)};
    item.fields = {{"persona", personas[a].name}, {"alt_persona", personas[b].name}};
    return item;
}

inline TaskSpec persona_task() {
    return {"persona",
            "'You are a P.' among filler, neutral question; rule rubric of persona marker words, or a judge model (swap: B has another persona)",
            /*swap=*/true,
            /*max_new=*/16,
            make_persona_item,
            [](const Item& item, std::string_view generated, const ScoreContext& ctx, Judge* judge) {
                check_sources(item, ctx);
                const Source src = control_source(ctx);
                const std::string pa = item_field(item, "persona"), pb = item_field(item, "alt_persona");
                const std::string& want = src == Source::B ? pb : pa;
                const RubricResult r = persona_markers(answer_line(generated));
                Score s;
                s.fields["source"] = to_string(src);
                s.fields["markers"] = r.found;
                s.fields["rubric_a"] = persona_rubric(r, pa);
                s.fields["rubric_b"] = persona_rubric(r, pb);
                const bool rule = persona_rubric(r, want);
                s.fields["rubric"] = rule;
                s.score = rule ? 1.0 : 0.0;
                if (judge) {
                    // Asked about both personas, as the rubric is, so "follows A" and "follows B"
                    // can be recomputed from a judged record too.
                    const bool ya = judge->yes(persona_judge_question(pa, generated));
                    const bool yb = judge->yes(persona_judge_question(pb, generated));
                    const bool yes = src == Source::B ? yb : ya;
                    s.fields["judge_a"] = ya;
                    s.fields["judge_b"] = yb;
                    s.fields["judge"] = yes;
                    s.score = yes ? 1.0 : 0.0;
                }
                return s;
            }};
}

}  // namespace hylens::tasks
