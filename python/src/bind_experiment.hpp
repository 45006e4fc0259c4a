#pragma once
// The channel study (experiments/channel_study.hpp) for Python: hylens._channel_study runs it
// into a folder exactly as `hylens experiment channels` does (items.jsonl, summaries,
// run.json); hylens.experiment (python/hylens/experiment.py) calls it and reads the records and
// summaries back as pandas DataFrames, or lists of dicts without pandas.

#include <hylens/experiments/channel_study.hpp>
#include <hylens/experiments/result_folder.hpp>
#include <hylens/experiments/study_judge.hpp>
#include <hylens/tasks/registry.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bind_model.hpp"
#include "study_run.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline void bind_experiment(pyb::module_& m) {
    m.def("experiment_tasks", [] { return tasks::task_names(); }, "Names of the study tasks (tasks/registry.hpp).");
    m.def("_result_folder_problem", [](const std::string& path) { return experiments::result_folder_problem(path); },
          pyb::arg("path"), "Why `path` cannot be a result folder, or '' (the tool's --out check).");
    m.def("_channel_study", [](const PyModel& model, const Tokenizer& tok, const std::vector<std::string>& task_names,
                               const std::string& conditions, const std::string& out, Count items,
                               const std::vector<std::uint64_t>& seeds, Count max_new, const std::string& layers,
                               const std::string& shard, bool resume, Count batch, bool progress, const PyModel* judge,
                               const Tokenizer* judge_tok) {
        namespace ex = experiments;
        ex::StudyOptions opt;
        for (const std::string& t : task_names) opt.tasks.push_back(&tasks::find_task(t));
        check<ShapeError>(!opt.tasks.empty(), "[experiment] no tasks given");
        opt.conditions = ex::parse_conditions(conditions);
        if (!layers.empty()) opt.layers = ex::parse_layer_spec(layers);
        if (!shard.empty()) opt.shard = ex::parse_shard(shard);
        check<ShapeError>(items >= 1, "[experiment] items must be at least 1");
        check<ShapeError>(!seeds.empty(), "[experiment] no seeds given");
        check<ShapeError>(batch >= 1, "[experiment] batch must be at least 1");
        opt.items = items;
        opt.seeds = seeds;
        opt.max_new = max_new;
        opt.resume = resume;
        opt.batch = batch;
        opt.progress = progress;
        opt.out = out;
        opt.run_info = python_run_info(model, tok);
        std::optional<tasks::ModelJudge> model_judge;
        if (judge) {
            check<ShapeError>(judge_tok != nullptr, "[experiment] a judge needs its tokenizer (judge_tokenizer)");
            model_judge.emplace(ex::study_judge(judge->any(), *judge_tok));
            opt.judge = &*model_judge;
            opt.judge_info = ex::study_judge_info(judge->path(), judge->any(), *judge_tok);
        }
        const ex::StudyResult r =
            run_study_released(model, [&](const auto& x, ChatFamily family) { return ex::run_channel_study(x, tok, family, opt); });
        pyb::dict d = study_counts(r.records, r.written, r.resumed);
        d["skipped_items"] = r.skipped_items;
        d["seconds"] = r.seconds;
        return d;
    }, pyb::arg("model"), pyb::arg("tokenizer"), pyb::arg("tasks"), pyb::arg("conditions"), pyb::arg("out"),
       pyb::arg("items"), pyb::arg("seeds"), pyb::arg("max_new"), pyb::arg("layers"), pyb::arg("shard"),
       pyb::arg("resume"), pyb::arg("batch"), pyb::arg("progress"), pyb::arg("judge").none(true),
       pyb::arg("judge_tokenizer").none(true));
}

}  // namespace hylens::python
