#pragma once
// The stitch study (experiments/stitch_study.hpp) for Python: hylens._stitch_study runs it into
// a folder exactly as `hylens experiment stitch` does (items.jsonl, summary.csv/json,
// adapters.safetensors, run.json); hylens.stitch_study (python/hylens/_experiment.py) calls it
// and reads the files back.

#include <hylens/experiments/stitch_study.hpp>
#include <hylens/tasks/lookup/fit_corpus.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bind_model.hpp"
#include "study_run.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline void bind_stitch(pyb::module_& m) {
    m.def("_stitch_study", [](const PyModel& host, const Tokenizer& host_tok, const PyModel& donor, const Tokenizer& donor_tok,
                              const std::string& out, const std::string& host_block, const std::string& donor_block,
                              const std::string& corpus, const std::string& variant, Count fit_prompts, Count fit_tokens,
                              Count test_items, Count ppl_seqs, Count ppl_len, const std::vector<std::string>& conditions,
                              const std::string& other_blocks, const std::string& reader,
                              const std::vector<std::uint64_t>& seeds, const std::string& shard, bool resume, bool progress) {
        namespace ex = experiments;
        ex::StitchStudyOptions opt;
        opt.host_blocks = ex::parse_layer_ranges(host_block);
        opt.donor_blocks = ex::parse_layer_ranges(donor_block);
        if (!other_blocks.empty()) opt.other_blocks = ex::parse_layer_ranges(other_blocks);
        if (!reader.empty()) opt.reader = ex::parse_reader_head(reader, "reader");
        opt.conditions = conditions;
        opt.variant = variant;
        opt.fit_prompts = fit_prompts;
        opt.fit_tokens = fit_tokens;
        opt.test_items = test_items;
        opt.ppl_seqs = ppl_seqs;
        opt.ppl_len = ppl_len;
        opt.seeds = seeds;
        set_python_run(opt, host, host_tok, out, shard, resume, progress);
        // run.json names the two models as the tool's does, with "via": "python" for the command line.
        opt.run_info = {{"host", std::filesystem::absolute(host.path()).string()},
                        {"host_type", host.model_type()},
                        {"host_tokenizer", tokenizer_file_json(host_tok)},
                        {"donor", std::filesystem::absolute(donor.path()).string()},
                        {"donor_type", donor.model_type()},
                        {"donor_tokenizer", tokenizer_file_json(donor_tok)},
                        {"hylens_version", hylens::version},
                        {"via", "python"}};
        const tasks::lookup::FitCorpus text =
            corpus.empty() ? tasks::lookup::read_fit_corpus() : tasks::lookup::read_fit_corpus(corpus);
        const ex::StitchStudyResult r =
            run_two_models_released(host, donor, [&](const auto& h, ChatFamily hf, const auto& d, ChatFamily df) {
                return ex::run_stitch_study(h, host_tok, hf, d, donor_tok, df, text, opt);
            });
        pyb::dict res = study_counts(r.records, r.written, r.resumed);
        res["seconds"] = r.seconds;
        return res;
    }, pyb::arg("host"), pyb::arg("host_tokenizer"), pyb::arg("donor"), pyb::arg("donor_tokenizer"), pyb::arg("out"),
       pyb::arg("host_block"), pyb::arg("donor_block"), pyb::arg("corpus"), pyb::arg("variant"), pyb::arg("fit_prompts"),
       pyb::arg("fit_tokens"), pyb::arg("test_items"), pyb::arg("ppl_seqs"), pyb::arg("ppl_len"), pyb::arg("conditions"),
       pyb::arg("other_blocks"), pyb::arg("reader"), pyb::arg("seeds"), pyb::arg("shard"), pyb::arg("resume"),
       pyb::arg("progress"));
}

}  // namespace hylens::python
