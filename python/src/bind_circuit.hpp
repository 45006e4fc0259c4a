#pragma once
// The circuit study (experiments/circuit_study.hpp) for Python: hylens._circuit_study runs it
// into a folder exactly as `hylens experiment circuit` does (items.jsonl, summary.csv/json,
// circuit.json, run.json); hylens.circuit_study (python/hylens/_experiment.py) calls it and reads
// the files back.

#include <hylens/experiments/circuit_study.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bind_model.hpp"
#include "study_run.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline void bind_circuit(pyb::module_& m) {
    m.def("_circuit_study", [](const PyModel& model, const Tokenizer& tok, const std::string& out, const std::string& variant,
                               Count per_config, const std::vector<std::uint64_t>& seeds, std::optional<Count> group_size,
                               Count top, const std::string& unit, double critical, const std::string& corpus,
                               Count filler_tokens, bool filler_given, const std::string& shard, bool resume, bool progress) {
        namespace ex = experiments;
        ex::CircuitStudyOptions opt;
        opt.variant = variant;
        opt.per_config = per_config;
        opt.seeds = seeds;
        opt.circuit.group_size = group_size_or_default(group_size, model);
        check<ShapeError>(top >= 1, "[circuit] top must be at least 1");
        opt.circuit.top = top;
        check<ShapeError>(unit == "mixer" || unit == "layer", "[circuit] unit must be 'mixer' or 'layer', got '", unit, "'");
        opt.circuit.unit = unit == "layer" ? RemovalUnit::layer : RemovalUnit::mixer;
        check<ShapeError>(critical >= 0.0 && critical <= 1.0, "[circuit] critical must be in [0, 1], got ", critical);
        opt.circuit.critical = critical;
        if (tasks::lookup::parse_variant(variant).long_filler) {
            check<ShapeError>(filler_tokens >= 1, "[circuit] filler_tokens must be at least 1");
            ex::set_long_filler(opt, tok, corpus, filler_tokens);
        } else {
            check<ShapeError>(!filler_given, "[circuit] corpus and filler_tokens are read by the 'long' variant alone");
        }
        set_python_run(opt, model, tok, out, shard, resume, progress);
        const ex::CircuitStudyResult r =
            run_study_released(model, [&](const auto& x, ChatFamily family) { return ex::run_circuit_study(x, tok, family, opt); });
        pyb::dict d = study_counts(r.records, r.written, r.resumed);
        d["seconds"] = r.seconds;
        d["items"] = r.items;
        return d;
    }, pyb::arg("model"), pyb::arg("tokenizer"), pyb::arg("out"), pyb::arg("variant"), pyb::arg("per_config"),
       pyb::arg("seeds"), pyb::arg("group_size"), pyb::arg("top"), pyb::arg("unit"), pyb::arg("critical"),
       pyb::arg("corpus"), pyb::arg("filler_tokens"), pyb::arg("filler_given"), pyb::arg("shard"), pyb::arg("resume"),
       pyb::arg("progress"));
}

}  // namespace hylens::python
