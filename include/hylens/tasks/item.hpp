#pragma once
// One item of a study task, independent of any model: the plain text of the context and the
// query, what counts as a correct answer, and the character spans of the parts. A task turns a
// (seed, index) into an Item deterministically, and scores a generated text against it.
//
// This header is the contract between the task generators (tasks/) and the study runner
// (experiments/): the runner knows nothing of a task beyond this.

#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint64_t
#include <string>    // std::string
#include <vector>    // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"

namespace hylens::tasks {

/// A named part of an item's text: characters [begin, end) of `context` (or of `query`,
/// or of `alt_context`, as `in` says). Characters are Unicode code points.
struct TextSpan {
    std::string name;     ///< "key", "value", "instruction", "item:3", ...
    std::string in;       ///< "context", "query" or "alt_context"
    std::size_t begin = 0, end = 0;
};

/// One generated item.
struct Item {
    std::string task;                   ///< task name ("dictionary", "language", ...)
    std::uint64_t seed = 0;             ///< data-generation seed
    std::size_t index = 0;              ///< index of the item within (task, seed)
    std::string context;                ///< text prefilled into the cache (source A)
    std::string query;                  ///< text fed after the (possibly edited) cache
    std::vector<std::string> expected;  ///< accepted answers for source A; expected[0] is canonical
    /// The second context of state-swap items (source B); empty for tasks without a B source.
    /// A and B are built to have equal length in words; the runner checks token lengths.
    std::string alt_context;
    std::vector<std::string> alt_expected;  ///< accepted answers for source B
    std::vector<TextSpan> spans;        ///< named parts of the texts
    nlohmann::json fields = nlohmann::json::object();  ///< task-specific fields, copied to the record
};

/// The string field `key` of an item's task-specific fields, as its task's generator wrote it;
/// a FormatError naming the task, the item and the field when it is missing or not a string
/// (an item edited, or another task's, scored through Python's score_answer: it was the JSON
/// library's bare "key 'persona' not found").
inline std::string item_field(const Item& item, const char* key) {
    const auto it = item.fields.is_object() ? item.fields.find(key) : item.fields.end();
    check<FormatError>(item.fields.is_object() && it != item.fields.end() && it->is_string(), "[", item.task, "] item ",
                       item.index, " has no text field '", key, "' (the task's generator writes one): the item was edited "
                       "or is another task's");
    return it->get<std::string>();
}

/// Which cache source each channel came from when the answer was generated.
enum class Source { A, B, none };

/// What the runner tells a scorer about the condition an answer was generated under.
struct ScoreContext {
    Source kv = Source::A;         ///< KV channel's source (none: dropped)
    Source recurrent = Source::A;  ///< recurrent channel's source (none: reset)
};

/// A scored generation: `score` is the primary number in [0, 1] that the statistics average;
/// `fields` holds the secondary measures (first-token match, detected language, ...) that are
/// written to the per-item record beside it.
struct Score {
    double score = 0.0;
    nlohmann::json fields = nlohmann::json::object();
};

}  // namespace hylens::tasks
