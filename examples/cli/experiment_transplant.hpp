#pragma once
// hylens experiment transplant: the representation and state transplants of the Encode-Address
// studies (exp22, exp32) on donor/host dictionary pairs. See docs/study_transplant.md.
//
//   hylens experiment transplant --model DIR [--tokenizer FILE] [--circuit FILE | --reader L:H]
//       [--blocks LIST] [--group-size N] [--positions LIST] [--kind LIST] [--upstream LIST]
//       [--watch LIST] [--variant V] [--per-config N] [--seed S | --seeds LIST] [--shard I/N] [--resume] [--no-progress] --out DIR
//
// Under mpirun, rank r runs shard r/N into OUT/ranks/rank-r-of-N and rank 0 merges them
// (study_mpi.hpp).

#include <hylens/experiments/merge_by_kind.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/experiments/study_folder.hpp>
#include <hylens/experiments/transplant_study.hpp>
#include <hylens/interp/circuit.hpp>
#include <hylens/models/load.hpp>
#include <hylens/version.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "study_mpi.hpp"

namespace hylens::cli {

namespace transplant_detail {

/// Splits "a,b,c" (no empty parts).
inline std::vector<std::string> split_list(const std::string& s, const char* what) {
    std::vector<std::string> out;
    std::size_t b = 0;
    while (b <= s.size()) {
        const std::size_t e = std::min(s.find(',', b), s.size());
        check(e > b, "--", what, ": empty entry in '", s, "'");
        out.push_back(s.substr(b, e - b));
        b = e + 1;
    }
    return out;
}

/// --group-size: `size`, or when size < 0 the model type's default (default_group_size).
inline std::size_t group_size_of(const std::string& model_type, long size) {
    return size >= 0 ? static_cast<std::size_t>(size) : default_group_size(model_type);
}

/// The syntax of a block list option (parse_block_spec), before a model is loaded; empty is
/// the option's default.
inline void check_block_syntax(const char* option, const std::string& spec) {
    if (spec.empty()) return;
    try {
        experiments::parse_block_spec(spec);
    } catch (const Error& e) {
        fail(option, ": ", e.what());
    }
}

}  // namespace transplant_detail

/// argv[1] is "transplant".
inline int run_experiment_transplant(int argc, char** argv) {
    namespace ex = experiments;
    namespace td = transplant_detail;
    CLI::App app("representation transplants (mixer outputs, layer writes; exp22) and state transplants (exp32) on "
                 "donor/host dictionary pairs, with the reader head's attention; items.jsonl, summary.csv/json, run.json",
                 "hylens experiment transplant");
    LookupStudyArgs a;
    a.add(app);
    a.add_seeds(app);
    std::string circuit, reader, blocks, upstream, watch, positions = "final,question,dictionary,all",
                                                          kinds = "mixer,layer,state,state+conv";
    long group_size = -1;
    CLI::Option* circ = app.add_option("--circuit", circuit, "circuit.json of `hylens experiment circuit`: the reader head")
                            ->check(CLI::ExistingFile);
    app.add_option("--reader", reader, "the reader head as LAYER:HEAD (instead of --circuit)")->excludes(circ);
    app.add_option("--blocks", blocks,
                   "blocks, comma-separated: a layer group G<i>, a layer, a range a-b, or a union joined by + "
                   "(default: every layer group)");
    app.add_option("--group-size", group_size, "layers per group (default: 3 for Qwen3.5, else every linear layer "
                                               "since the previous softmax layer)")
        ->check(CLI::Range(0L, 1000L));
    app.add_option("--positions", positions, "position sets of the kinds that copy rows: final, question, "
                                             "question-nofinal, dictionary, all")
        ->capture_default_str();
    app.add_option("--kind", kinds, "transplant kinds: mixer, layer, mixer_in, resid_pre, upstream, state, state+conv")
        ->capture_default_str();
    app.add_option("--upstream", upstream, "blocks removed (mixers zeroed) from the donor of the upstream kind, "
                                           "comma-separated as --blocks (exp32-C)");
    app.add_option("--watch", watch, "extra heads whose attention on entries A and B is recorded, as LAYER:HEAD, "
                                     "comma-separated");
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    ex::TransplantStudyOptions opt;
    try {
        ex::set_donor_host_variant(opt, a.variant);
        opt.positions.clear();
        for (const std::string& p : td::split_list(positions, "positions")) opt.positions.push_back(ex::parse_position_set(p));
        opt.kinds.clear();
        for (const std::string& k : td::split_list(kinds, "kind")) opt.kinds.push_back(ex::parse_transplant_kind(k));
        const bool wants_upstream = std::find(opt.kinds.begin(), opt.kinds.end(), ex::TransplantKind::upstream) != opt.kinds.end();
        check(wants_upstream == !upstream.empty(), wants_upstream ? "--kind upstream needs --upstream BLOCKS"
                                                                  : "--upstream is read by --kind upstream alone");
        td::check_block_syntax("--blocks", blocks);  // the rest is checked against the model
        td::check_block_syntax("--upstream", upstream);
        if (!reader.empty()) opt.reader = parse_reader(reader);
        if (!watch.empty())
            for (const std::string& w : td::split_list(watch, "watch")) opt.watch.push_back(parse_reader(w, "--watch"));
        if (!a.shard.empty()) opt.shard = ex::parse_shard(a.shard);
        opt.seeds = a.seed_list();
    } catch (const Error& e) {
        std::cerr << "hylens experiment transplant: " << e.what() << "\n" << usage_line(app) << "\n";
        return 2;
    }
    opt.per_config = a.per_config;
    opt.resume = a.resume;
    opt.progress = !a.no_progress;
    const std::vector<std::string> all(argv - 1, argv + argc);
    return run_study_ranks(
        "transplant", opt.shard, !a.shard.empty(), a.out,
        [&](const StudyPlace& place) {
            const AnyModel model = load_model(a.model);
            const std::filesystem::path tok_path = study_tokenizer_path(a.model, a.tokenizer);
            const Tokenizer tok = Tokenizer::from_file(tok_path.string());
            const std::string type = model.config().model_type;
            ex::TransplantStudyOptions o = opt;
            o.shard = place.shard;
            o.out = place.out;
            if (!circuit.empty()) ex::use_circuit_roles(o, read_circuit_file(circuit), false);  // --reader excludes --circuit
            o.run_info = study_run_info(a.model, type, tok_path, all, place.ranks, hylens::version);
            o.run_info["circuit"] = circuit.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::filesystem::absolute(circuit).string());
            const ex::TransplantStudyResult r = model.visit([&](const auto& m) {
                ex::set_transplant_blocks(o, m, td::group_size_of(type, group_size), blocks, upstream);
                return ex::run_transplant_study(m, tok, chat_format(ex::chat_family(type)), o);
            });
            std::cerr << "hylens experiment transplant: " << r.items << " pairs, " << r.records << " records (" << r.written
                      << " new, " << r.resumed << " resumed) -> " << o.out.string() << "\n";
        },
        experiments::merge_transplant_folders);
}

}  // namespace hylens::cli
