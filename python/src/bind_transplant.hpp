#pragma once
// The transplant study (experiments/transplant_study.hpp) for Python: hylens._transplant_study
// runs it into a folder exactly as `hylens experiment transplant` does (items.jsonl,
// summary.csv/json, run.json); hylens.transplant_study (python/hylens/_experiment.py) calls it
// and reads the files back.

#include <hylens/experiments/transplant_study.hpp>
#include <hylens/interp/circuit.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bind_model.hpp"
#include "study_run.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline void bind_transplant(pyb::module_& m) {
    m.def("_transplant_study", [](const PyModel& model, const Tokenizer& tok, const std::string& out,
                                  const std::string& variant, Count per_config, const std::vector<std::uint64_t>& seeds,
                                  const std::string& circuit, const std::string& reader, const std::string& blocks,
                                  std::optional<Count> group_size, const std::vector<std::string>& positions,
                                  const std::vector<std::string>& kinds, const std::string& upstream,
                                  const std::vector<std::string>& watch, const std::string& shard, bool resume,
                                  bool progress) {
        namespace ex = experiments;
        ex::TransplantStudyOptions opt;
        ex::set_donor_host_variant(opt, variant);
        opt.per_config = per_config;
        opt.seeds = seeds;
        opt.positions.clear();
        for (const std::string& p : positions) opt.positions.push_back(ex::parse_position_set(p));
        opt.kinds.clear();
        for (const std::string& k : kinds) opt.kinds.push_back(ex::parse_transplant_kind(k));
        if (!reader.empty()) opt.reader = ex::parse_reader_head(reader, "reader");
        if (!circuit.empty()) ex::use_circuit_roles(opt, read_circuit_file(circuit), !reader.empty());
        for (const std::string& w : watch) opt.watch.push_back(ex::parse_reader_head(w, "watch"));
        set_python_run(opt, model, tok, out, shard, resume, progress);
        opt.run_info["circuit"] =
            circuit.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::filesystem::absolute(circuit).string());
        const std::size_t gs = group_size_or_default(group_size, model);
        const auto t0 = std::chrono::steady_clock::now();
        const ex::TransplantStudyResult r = run_study_released(model, [&](const auto& x, ChatFamily family) {
            ex::set_transplant_blocks(opt, x, gs, blocks, upstream);
            return ex::run_transplant_study(x, tok, chat_format(family), opt);
        });
        pyb::dict d = study_counts(r.records, r.written, r.resumed);
        d["items"] = r.items;
        d["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return d;
    }, pyb::arg("model"), pyb::arg("tokenizer"), pyb::arg("out"), pyb::arg("variant"), pyb::arg("per_config"),
       pyb::arg("seeds"), pyb::arg("circuit"), pyb::arg("reader"), pyb::arg("blocks"), pyb::arg("group_size"),
       pyb::arg("positions"), pyb::arg("kinds"), pyb::arg("upstream"), pyb::arg("watch"), pyb::arg("shard"),
       pyb::arg("resume"), pyb::arg("progress"));
}

}  // namespace hylens::python
