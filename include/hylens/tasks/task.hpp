#pragma once
// A study task as the runner sees it: a name, a deterministic item generator and a scorer.
// The task generators (tasks/*.hpp) each provide one TaskSpec; tasks/registry.hpp lists them.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <functional>   // std::function
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "item.hpp"

namespace hylens::tasks {

/// Answers a yes/no question about a text (the persona judge). A second model loaded with
/// hylens implements it (tasks/judge.hpp); the rule-based rubric needs none.
struct Judge {
    virtual ~Judge() = default;
    /// True when the judge answers "yes" to `question` (which quotes the text to judge).
    virtual bool yes(std::string_view question) = 0;
};

struct TaskSpec {
    std::string name;         ///< "dictionary", "list", "language", ...
    std::string description;  ///< one line for --help and the docs
    bool swap = false;        ///< items carry a B source (alt_context); the swap conditions apply
    std::size_t max_new = 8;  ///< default number of tokens to generate for an answer
    /// Item `index` of `seed`: the same (seed, index) gives the same item on every machine.
    std::function<Item(std::uint64_t seed, std::size_t index)> make;
    /// Scores a generated answer (decoded text, special tokens removed). `judge` may be null.
    std::function<Score(const Item&, std::string_view generated, const ScoreContext&, Judge* judge)> score;
};

}  // namespace hylens::tasks
