#pragma once
// The encode-swap study (experiments/encode_swap_study.hpp) for Python: hylens._encode_swap_study
// runs it into a folder exactly as `hylens experiment encode-swap` does (items.jsonl,
// summary.csv/json, run.json); hylens.encode_swap_study (python/hylens/_experiment.py) calls it
// and reads the files back.

#include <hylens/experiments/encode_swap_study.hpp>
#include <hylens/interp/circuit.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bind_model.hpp"
#include "study_run.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline void bind_encode_swap(pyb::module_& m) {
    m.def("_encode_swap_study", [](const PyModel& model, const Tokenizer& tok, const std::string& out,
                                   const std::string& circuit, const std::optional<std::vector<LayerIndex>>& other_layers,
                                   const std::string& variant, Count per_config, std::uint64_t seed, const std::string& shard,
                                   bool resume, bool progress) {
        namespace ex = experiments;
        ex::EncodeSwapOptions opt;
        ex::set_encode_swap_roles(opt, read_circuit_file(circuit), other_layers);
        opt.variant = variant;
        opt.per_config = per_config;
        opt.seed = seed;
        set_python_run(opt, model, tok, out, shard, resume, progress);
        opt.run_info["circuit"] = std::filesystem::absolute(circuit).string();
        const ex::EncodeSwapResult r = run_study_released(
            model, [&](const auto& x, ChatFamily family) { return ex::run_encode_swap_study(x, tok, family, opt); });
        pyb::dict d = study_counts(r.records, r.written, r.resumed);
        d["items"] = r.items;
        d["key_items"] = r.key_items;
        d["seconds"] = r.seconds;
        return d;
    }, pyb::arg("model"), pyb::arg("tokenizer"), pyb::arg("out"), pyb::arg("circuit"), pyb::arg("other_layers"),
       pyb::arg("variant"), pyb::arg("per_config"), pyb::arg("seed"), pyb::arg("shard"), pyb::arg("resume"),
       pyb::arg("progress"));
}

}  // namespace hylens::python
