#pragma once
// Which source (A or B) a scorer holds an answer to, from the channels' sources.
// Recall (dictionary values, list items) is read against the KV channel's source, control
// (language, persona) against the recurrent channel's source; when that channel was removed
// the other one's source counts, and with both removed source A (the NONE control).
// The scorers also record the match against both sources, so any other reading can be
// recomputed from the per-item records.

#include <string>  // std::string
#include <vector>  // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/item.hpp"

namespace hylens::tasks {

inline const char* to_string(Source s) noexcept { return s == Source::A ? "A" : s == Source::B ? "B" : "none"; }

inline Source recall_source(const ScoreContext& c) noexcept {
    return c.kv != Source::none ? c.kv : c.recurrent != Source::none ? c.recurrent : Source::A;
}

inline Source control_source(const ScoreContext& c) noexcept {
    return c.recurrent != Source::none ? c.recurrent : c.kv != Source::none ? c.kv : Source::A;
}

/// Checks that a condition using source B is scored only on an item that has one.
inline void check_sources(const Item& item, const ScoreContext& c) {
    check(item.alt_context.size() > 0 || (c.kv != Source::B && c.recurrent != Source::B), "[tasks] ", item.task,
          " item ", item.index, " has no B source, but the condition takes a channel from B");
}

/// The accepted answers of source s (B: alt_expected).
inline const std::vector<std::string>& expected_of(const Item& item, Source s) {
    if (s != Source::B) return item.expected;
    check(!item.alt_expected.empty(), "[tasks] ", item.task, " item ", item.index, " has no B answers");
    return item.alt_expected;
}

}  // namespace hylens::tasks
