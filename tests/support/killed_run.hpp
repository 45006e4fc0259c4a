#pragma once
// A killed run's run.json, made from a finished one for the resume tests: a run writes
// run.json when it starts ("running") and rewrites it when it finishes, adding the counts,
// the timings and the items fingerprint. A test that cuts a finished folder's items.jsonl to
// fake a kill must also undo those, or the resume rightly refuses an items.jsonl that is not
// the one its run.json describes.

#include <nlohmann/json.hpp>

namespace hylens::test {

/// `run` (a finished run.json) as the run's start wrote it.
inline nlohmann::json as_killed(nlohmann::json run) {
    run["status"] = "running";
    for (const char* k : {"finished", "records", "records_written", "timings", "items_fnv1a64"}) run.erase(k);
    return run;
}

}  // namespace hylens::test
