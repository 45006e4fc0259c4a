// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for a task item read back from JSON, as Python's score_answer reads an item
// the caller may have edited (python/src/bind_tasks.hpp: check_json_depth, json::parse,
// item_from_json, find_task, parse_condition, TaskSpec::score). The input, cut at NUL bytes, is
// the item's JSON (a `hylens tasks --json` line), the generated answer and the condition
// (default FULL). An item must be refused with a hylens::Error or read, round-trip through
// item_to_json, and be scored to a finite score in [0, 1]. A finding: another exception
// escaping (nlohmann::json's out_of_range / type_error from a scorer reading item.fields
// included), a sanitizer report, or a score outside [0, 1].
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hylens/experiments/conditions.hpp"
#include "hylens/io/json_depth.hpp"
#include "hylens/tasks/item_json.hpp"
#include "hylens/tasks/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace hylens;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::size_t cut1 = in.find('\0');
    const std::string_view item_text = in.substr(0, cut1);
    std::string_view answer, condition = "FULL";
    if (cut1 != std::string_view::npos) {
        const std::size_t cut2 = in.find('\0', cut1 + 1);
        answer = in.substr(cut1 + 1, cut2 == std::string_view::npos ? std::string_view::npos : cut2 - cut1 - 1);
        if (cut2 != std::string_view::npos) condition = in.substr(cut2 + 1);
    }
    try {
        // What the binding does: the nesting checked first (a FormatError), then not JSON is its
        // ValueError, before any other library call.
        io::check_json_depth(item_text, "<fuzz> item");
        const nlohmann::json j = nlohmann::json::parse(item_text, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) return 0;
        const tasks::Item item = tasks::item_from_json(j);
        if (tasks::item_from_json(tasks::item_to_json(item)).fields != item.fields) std::abort();
        const tasks::TaskSpec& spec = tasks::find_task(item.task);
        const experiments::Condition cond = experiments::parse_condition(condition);
        if (cond.needs_b() && !spec.swap) return 0;  // the binding refuses it with a hylens::Error
        const tasks::Score s = spec.score(item, answer, cond.score_context(), nullptr);
        if (!(std::isfinite(s.score) && s.score >= 0.0 && s.score <= 1.0)) std::abort();
        (void)s.fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const hylens::Error&) {
    }
    return 0;
}
