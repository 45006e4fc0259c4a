#pragma once
// The query-map study (experiments/query_map_study.hpp) for Python: hylens._query_map_study runs
// it into a folder exactly as `hylens experiment query-map` does (items.jsonl, summary.csv/json,
// run.json with the fits); hylens.query_map_study (python/hylens/_experiment.py) calls it and
// reads the files back.

#include <hylens/experiments/query_map_study.hpp>
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

inline void bind_query_map(pyb::module_& m) {
    m.def("_query_map_study", [](const PyModel& model, const Tokenizer& tok, const std::string& out, const PyModel* donor,
                                 const Tokenizer* donor_tok, const std::string& circuit, const std::string& address,
                                 const std::string& reader, const std::string& sources, bool embedding,
                                 std::optional<Count> group_size, Count fit, const std::vector<Count>& curve,
                                 const std::string& variant, Count per_config, const std::vector<std::uint64_t>& seeds,
                                 const std::string& shard, bool resume, bool progress) {
        namespace ex = experiments;
        check(donor != nullptr || donor_tok == nullptr, "[query-map] a donor tokenizer needs a donor model");
        ex::QueryMapOptions opt;
        ex::set_donor_host_variant(opt, variant, "query-map");
        check<ShapeError>(fit >= 10, "[query-map] fit must be at least 10, got ", fit);
        opt.fit_items = fit;
        for (const Count n : curve) check<ShapeError>(n >= 10 && n < fit, "[query-map] curve: ", static_cast<std::size_t>(n), " is not in [10, fit)");
        opt.curve.assign(curve.begin(), curve.end());
        opt.per_config = per_config;
        opt.seeds = seeds;
        opt.embedding_source = embedding;
        if (!reader.empty()) opt.reader = ex::parse_reader_head(reader, "reader");
        if (!circuit.empty()) ex::use_circuit_roles(opt, read_circuit_file(circuit), !reader.empty());
        set_python_run(opt, model, tok, out, shard, resume, progress);
        const PyModel& dm = donor ? *donor : model;
        const Tokenizer& dt = donor_tok ? *donor_tok : tok;
        opt.run_info["donor"] = donor ? nlohmann::json(std::filesystem::absolute(donor->path()).string()) : nlohmann::json(nullptr);
        opt.run_info["donor_model_type"] = dm.model_type();
        opt.run_info["donor_tokenizer"] = tokenizer_file_json(dt);
        opt.run_info["circuit"] =
            circuit.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::filesystem::absolute(circuit).string());
        opt.vocabulary = ex::query_map_vocabulary(tok, donor_tok);
        const std::size_t gs_r = group_size_or_default(group_size, model), gs_d = group_size_or_default(group_size, dm);
        const auto t0 = std::chrono::steady_clock::now();
        const ex::QueryMapResult r =
            run_two_models_released(model, dm, [&](const auto& x, ChatFamily xf, const auto& d, ChatFamily df) {
                ex::set_query_map_blocks(opt, x, gs_r, d, gs_d, address, sources, opt.circuit);
                return ex::run_query_map_study(x, tok, chat_format(xf), d, dt, chat_format(df), opt);
            });
        pyb::dict res = study_counts(r.records, r.written, r.resumed);
        res["items"] = r.items;
        res["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }, pyb::arg("model"), pyb::arg("tokenizer"), pyb::arg("out"), pyb::arg("donor").none(true),
       pyb::arg("donor_tokenizer").none(true), pyb::arg("circuit"), pyb::arg("address"), pyb::arg("reader"),
       pyb::arg("sources"), pyb::arg("embedding"), pyb::arg("group_size"), pyb::arg("fit"), pyb::arg("curve"),
       pyb::arg("variant"), pyb::arg("per_config"), pyb::arg("seeds"), pyb::arg("shard"), pyb::arg("resume"),
       pyb::arg("progress"));
}

}  // namespace hylens::python
