#pragma once
// hylens experiment: the channel study (split-prefill and state swap) on a model folder, and
// the merge of sharded result folders. See docs/experiments.md.
//
//   hylens experiment channels --model DIR [--tokenizer FILE] --task T[,T...] [--conditions LIST]
//       [--items N] [--seeds LIST] [--max-new N] [--layers SPEC] [--shard I/N] [--batch N] [--resume]
//       [--judge DIR [--judge-tokenizer FILE]] [--no-progress] --out DIR
//   hylens experiment merge DIR... --out DIR
//
// Built with HYLENS_WITH_MPI, `mpirun -np N hylens experiment channels ...` runs shard r/N on
// rank r into OUT/ranks/rank-r-of-N and rank 0 merges them into OUT (run_study_ranks, as every
// study).

#include <hylens/experiments/channel_study.hpp>
#include <hylens/experiments/merge_by_kind.hpp>
#include <hylens/experiments/study_judge.hpp>
#include <hylens/models/load.hpp>
#include <hylens/tasks/registry.hpp>
#include <hylens/version.hpp>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "experiment_circuit.hpp"
#include "experiment_encode_swap.hpp"
#include "experiment_query_map.hpp"  // and experiment_transplant.hpp
#include "experiment_stitch.hpp"
#include "study_mpi.hpp"  // run_study_ranks

namespace hylens::cli {

namespace detail {

struct ChannelsArgs {
    std::string model, tokenizer, conditions = "FULL,KV_ONLY,REC_ONLY,NONE,KV_A+REC_B,KV_B+REC_A,KV_A+REC_A,KV_B+REC_B";
    std::vector<std::string> tasks;
    std::size_t items = 600, max_new = 0, batch = 16;
    std::vector<std::uint64_t> seeds{1, 2, 3};
    std::string layers, shard, out, judge, judge_tokenizer;
    bool resume = false, no_mmap = false, no_progress = false;
};

inline int run_channels(const ChannelsArgs& a, const std::vector<std::string>& argv_all, const std::string& usage) {
    namespace ex = experiments;
    ex::StudyOptions opt;
    // Arguments that CLI11 cannot check on its own: usage errors (exit 2).
    try {
        for (const std::string& t : a.tasks) opt.tasks.push_back(&tasks::find_task(t));
        opt.conditions = ex::parse_conditions(a.conditions);
        if (!a.layers.empty()) opt.layers = ex::parse_layer_spec(a.layers);
        if (!a.shard.empty()) opt.shard = ex::parse_shard(a.shard);
        check(a.items >= 1, "--items must be at least 1");
        check(!a.seeds.empty(), "--seeds is empty");
        // Twice-listed tasks or seeds (records counted twice) are usage errors, before the model loads.
        ex::check_distinct_seeds(a.seeds, "experiment");
        ex::check_distinct_tasks(opt.tasks);
    } catch (const Error& e) {
        std::cerr << "hylens experiment channels: " << e.what() << "\n" << usage << "\n(hylens experiment channels --help for details)\n";
        return 2;
    }
    opt.items = a.items;
    opt.seeds = a.seeds;
    opt.max_new = a.max_new;
    opt.resume = a.resume;
    opt.batch = a.batch;
    opt.progress = !a.no_progress;
    const auto study = [&](const StudyPlace& place) {
        opt.shard = place.shard;
        opt.out = place.out;
        // The judge model (persona) is loaded first: a bad --judge fails before any item runs.
        std::optional<AnyModel> judge_model;
        std::optional<Tokenizer> judge_tok;
        std::optional<tasks::ModelJudge> judge;
        if (!a.judge.empty()) {
            check(std::filesystem::is_directory(a.judge), "[experiment] --judge ", a.judge,
                  " is not a model folder (config.json + *.safetensors)");
            judge_model.emplace(load_model(a.judge));
            const std::filesystem::path jt = a.judge_tokenizer.empty() ? std::filesystem::path(a.judge) / "tokenizer.json"
                                                                       : std::filesystem::path(a.judge_tokenizer);
            check(std::filesystem::exists(jt), "[experiment] ", jt.string(),
                  " does not exist: the judge reads text, pass --judge-tokenizer FILE");
            judge_tok.emplace(Tokenizer::from_file(jt.string()));
            judge.emplace(ex::study_judge(*judge_model, *judge_tok));
            opt.judge = &*judge;
            opt.judge_info = ex::study_judge_info(a.judge, *judge_model, *judge_tok);
        }
        const AnyModel model = load_model(a.model, load_options(a.no_mmap));
        const std::filesystem::path tok_path = study_tokenizer_path(a.model, a.tokenizer);
        const Tokenizer tok = Tokenizer::from_file(tok_path.string());
        const ChatFamily family = ex::chat_family(model.config().model_type);
        opt.run_info = study_run_info(a.model, model.config().model_type, tok_path, argv_all, place.ranks, hylens::version);
        const ex::StudyResult r =
            model.visit([&](const auto& m) { return ex::run_channel_study(m, tok, family, opt); });
        std::cerr << "hylens experiment channels: " << r.records << " records (" << r.written << " new, " << r.resumed
                  << " resumed, " << r.skipped_items << " items skipped) in " << r.seconds << " s -> "
                  << opt.out.string() << "\n";
    };
    return run_study_ranks("channels", opt.shard, !a.shard.empty(), a.out, study,
                           [](const auto& d, const auto& o) { return ex::merge_results(d, o); });
}

}  // namespace detail

inline int run_experiment(int argc, char** argv) {
    // Studies with a header of their own (examples/cli/experiment_<study>.hpp) take over the
    // command line from their name on: run_experiment_<study>(argc - 1, argv + 1), argv[1] is the
    // study's name. One line per study here; the CLI11 app below lists them for --help.
    if (argc >= 3) {
        const std::string_view study = argv[2];
        if (study == "circuit") return run_experiment_circuit(argc - 1, argv + 1);
        if (study == "encode-swap") return run_experiment_encode_swap(argc - 1, argv + 1);
        if (study == "transplant") return run_experiment_transplant(argc - 1, argv + 1);
        if (study == "query-map") return run_experiment_query_map(argc - 1, argv + 1);
        if (study == "stitch") return run_experiment_stitch(argc - 1, argv + 1);
        // CLI11 would answer a misspelt study, or an option before the study, with "A
        // subcommand is required".
        const bool option = !study.empty() && study[0] == '-';
        if (option ? study != "-h" && study != "--help" : study != "channels" && study != "merge") {
            std::cerr << "hylens experiment: " << (option ? "the study comes first, then its options: " : "unknown study ")
                      << "'" << study << "' (channels, circuit, encode-swap, transplant, query-map, stitch, merge)\n"
                      << "Usage: hylens experiment STUDY [OPTIONS]\n(hylens experiment --help for details)\n";
            return 2;
        }
    }
    CLI::App app("studies on a model folder; results as items.jsonl, summary.csv/json, diffs.csv, run.json",
                 "hylens experiment");
    app.require_subcommand(1);
    detail::ChannelsArgs a;
    CLI::App* ch = app.add_subcommand(
        "channels",
        "split-prefill and state-swap study: tasks x seeds x items x conditions, greedy answers, scores, bootstrap CIs");
    ch->add_option("--model", a.model, "model folder (config.json + *.safetensors)")->required()->check(CLI::ExistingDirectory);
    ch->add_option("--tokenizer", a.tokenizer, "tokenizer.json (default: the model folder's)")->check(CLI::ExistingFile);
    ch->add_option("--task", a.tasks, "tasks, comma-separated (hylens tasks --list)")->required()->delimiter(',');
    ch->add_option("--conditions", a.conditions,
                   "comma-separated: FULL, KV_ONLY, REC_ONLY, NONE, KV_A+REC_B, KV_B+REC_A, KV_A+REC_A, KV_B+REC_B, "
                   "each optionally @LAYERS (e.g. KV_ONLY@0-3+5); default: all eight")
        ->capture_default_str();
    ch->add_option("--items", a.items, "items per task and seed")->capture_default_str()->check(at_least(1));
    ch->add_option("--seeds", a.seeds, "data-generation seeds, comma-separated")->capture_default_str()->delimiter(',');
    ch->add_option("--max-new", a.max_new, "tokens generated per answer (default: each task's own)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{4096}));
    ch->add_option("--layers", a.layers,
                   "layer sweeps, comma-separated: single, cumulative, cumulative-top, or a layer set like 0-3+5");
    ch->add_option("--shard", a.shard, "run shard I of N (items numbered in study order, taken I mod N)");
    ch->add_option("--batch", a.batch, "most items per forward (1: one at a time; the records are the same)")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
    ch->add_flag("--no-progress", a.no_progress, "no progress line on stderr");
    add_no_mmap(*ch, a.no_mmap);
    ch->add_flag("--resume", a.resume, "continue a killed run in --out (records already there are kept)");
    CLI::Option* judge = ch->add_option(
        "--judge", a.judge, "persona judge: a model folder loaded with hylens answers a yes/no rubric (default: the rule rubric)");
    ch->add_option("--judge-tokenizer", a.judge_tokenizer, "the judge's tokenizer.json (default: the judge folder's)")
        ->check(CLI::ExistingFile)
        ->needs(judge);
    ch->add_option("--out", a.out, "result folder")->required()->check(result_folder());
    app.add_subcommand("circuit", "Encode / Address / reader-head identification (B1-B7) on dictionary pairs; circuit.json");
    app.add_subcommand("encode-swap", "Encode (Bind) sufficiency swaps (exp29) at the value and key tokens, with a circuit.json");
    app.add_subcommand("transplant", "mixer-output, layer-write (exp22) and state (exp32) transplants on donor/host pairs, reader attention");
    app.add_subcommand("query-map", "query-vector transfer (exp26): ridge maps donor -> receiver Address outputs, controls, learning curves");
    app.add_subcommand("stitch", "cross-family block stitching (exp27 / exp34): ridge adapters on aligned text, every condition on lookups and perplexity");
    std::vector<std::string> merge_dirs;
    std::string merge_out;
    CLI::App* mg = app.add_subcommand("merge", "merge the result folders of a sharded study (recomputes the summaries)");
    mg->add_option("dirs", merge_dirs, "result folders (one per shard)")->required()->check(CLI::ExistingDirectory);
    mg->add_option("--out", merge_out, "merged result folder")->required()->check(result_folder());
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
    if (ch->parsed()) {
        const std::vector<std::string> all(argv, argv + argc);
        return detail::run_channels(a, all, usage_line(*ch));
    }
    std::vector<std::filesystem::path> dirs(merge_dirs.begin(), merge_dirs.end());
    // The study's own merge, by the first folder's run.json kind (experiments/merge_by_kind.hpp).
    return report_merge(experiments::merge_result_folders(dirs, merge_out), merge_out);
}

}  // namespace hylens::cli
