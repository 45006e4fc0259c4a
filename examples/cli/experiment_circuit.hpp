#pragma once
// hylens experiment circuit: the Encode / Address / reader identification battery (B1-B7) on
// clean/corrupted dictionary pairs; per-item records, summaries with bootstrap CIs,
// circuit.json. See docs/study_circuit.md.
//
//   hylens experiment circuit --model DIR [--tokenizer FILE] [--variant chat8|...|long]
//       [--corpus FILE] [--filler-tokens N] [--per-config N] [--seed S | --seeds LIST] [--group-size G]
//       [--top K]
//       [--unit mixer|layer] [--critical X] [--shard I/N] [--resume] [--no-progress] --out DIR

#include <hylens/experiments/circuit_study.hpp>
#include <hylens/experiments/merge_by_kind.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>
#include <hylens/tasks/lookup/fit_corpus.hpp>
#include <hylens/version.hpp>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "study_mpi.hpp"

namespace hylens::cli {

/// argv[1] is "circuit".
inline int run_experiment_circuit(int argc, char** argv) {
    namespace ex = experiments;
    CLI::App app("Encode / Address / reader-head identification (battery B1-B7) on clean/corrupted dictionary "
                 "pairs; items.jsonl, summary.csv/json, circuit.json, run.json",
                 "hylens experiment circuit");
    LookupStudyArgs a;
    a.add(app, true);
    a.add_seeds(app);
    std::string corpus;
    std::size_t filler_tokens = 512;
    CLI::Option* corpus_opt =
        app.add_option("--corpus", corpus,
                       "--variant long: the text whose held-out chunks give the filler (default " +
                           std::string(tasks::lookup::fit_corpus_default_path) + " of the Debian package " +
                           std::string(tasks::lookup::fit_corpus_package) + ")")
            ->check(CLI::ExistingFile);
    CLI::Option* filler_opt = app.add_option("--filler-tokens", filler_tokens,
                                             "--variant long: filler tokens between the dictionary and the question")
                                  ->capture_default_str()
                                  ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
    std::string unit = "mixer";
    std::size_t top = 8;
    long long group_size = -1;
    double critical = 0.6;
    app.add_option("--group-size", group_size,
                   "linear layers per group before each softmax layer (0: all since the previous softmax layer; "
                   "default: 3 for Qwen3.5, 0 otherwise)")
        ->check(CLI::Range(0LL, 1000LL));
    app.add_option("--top", top, "reader-search candidates (heads by target mass)")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
    app.add_option("--unit", unit, "removal unit: mixer (mixer output zeroed) or layer (layer outputs its input)")
        ->capture_default_str()
        ->check(CLI::IsMember({"mixer", "layer"}));
    app.add_option("--critical", critical, "B3: a layer is critical when its removal leaves gap < X x baseline")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    ex::CircuitStudyOptions opt;
    try {
        if (!a.shard.empty()) opt.shard = ex::parse_shard(a.shard);
        opt.seeds = a.seed_list();
        check(a.variant == "long" || (corpus_opt->count() == 0 && filler_opt->count() == 0),
              "--corpus and --filler-tokens are read by --variant long alone");
    } catch (const Error& e) {
        std::cerr << "hylens experiment circuit: " << e.what() << "\n" << usage_line(app) << "\n";
        return 2;
    }
    opt.variant = a.variant;
    opt.per_config = a.per_config;
    opt.circuit.top = top;
    opt.circuit.critical = critical;
    opt.circuit.unit = unit == "layer" ? RemovalUnit::layer : RemovalUnit::mixer;
    opt.resume = a.resume;
    opt.progress = !a.no_progress;
    const std::vector<std::string> all(argv - 1, argv + argc);
    return run_study_ranks(
        "circuit", opt.shard, !a.shard.empty(), a.out,
        [&](const StudyPlace& place) {
            const AnyModel m = load_model(a.model);
            const std::filesystem::path tok_path = study_tokenizer_path(a.model, a.tokenizer);
            const Tokenizer tok = Tokenizer::from_file(tok_path.string());
            const std::string type = m.config().model_type;
            ex::CircuitStudyOptions o = opt;
            o.shard = place.shard;
            o.out = place.out;
            o.circuit.group_size = group_size >= 0 ? static_cast<std::size_t>(group_size) : default_group_size(type);
            o.run_info = study_run_info(a.model, type, tok_path, all, place.ranks, hylens::version);
            // The protocol's long512: WikiText-2 test text; here the corpus's held-out chunks.
            if (a.variant == "long") ex::set_long_filler(o, tok, corpus, filler_tokens);
            const ex::CircuitStudyResult r =
                m.visit([&](const auto& typed) { return ex::run_circuit_study(typed, tok, ex::chat_family(type), o); });
            std::cerr << "hylens experiment circuit: " << r.items
                      << (o.shard.count > 1 ? " pairs in the study (every shard), " : " pairs, ") << r.records << " records (" << r.written
                      << " new, " << r.resumed << " resumed) in " << r.seconds << " s -> " << o.out.string() << "\n";
        },
        experiments::merge_circuit_folders);
}

}  // namespace hylens::cli
