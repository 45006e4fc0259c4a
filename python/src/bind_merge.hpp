#pragma once
// hylens._merge: the merge of a study's shard folders (experiments/merge_by_kind.hpp), as
// `hylens experiment merge` does it; hylens.merge (python/hylens/_experiment.py) calls it and
// reads the merged folder back as the study's result class.

#include <hylens/experiments/merge_by_kind.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <string>
#include <vector>

#include "nogil.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline void bind_merge(pyb::module_& m) {
    m.def("_merge", [](const std::vector<std::string>& folders, const std::string& out) {
        namespace ex = experiments;
        check(!folders.empty(), "[merge] no result folder given");
        const std::vector<std::filesystem::path> dirs(folders.begin(), folders.end());
        const std::string kind = ex::result_kind(dirs.front());
        ex::MergeResult r;
        {
            const NoGil nogil;
            r = ex::merge_result_folders(dirs, out);
        }
        pyb::dict d;
        d["kind"] = kind;
        d["folders"] = r.folders;
        d["records"] = r.records;
        d["incomplete"] = r.incomplete;
        d["missing_shards"] = r.missing_shards;
        return d;
    }, pyb::arg("folders"), pyb::arg("out"));
}

}  // namespace hylens::python
