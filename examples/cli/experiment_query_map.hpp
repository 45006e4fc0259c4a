#pragma once
// hylens experiment query-map: the query-vector transfer of the Encode-Address studies (exp26):
// ridge maps from a donor model's final-position features to the receiver's Address-layer
// mixer outputs, with the controls and learning curves. See docs/study_transplant.md.
//
//   hylens experiment query-map --model DIR [--tokenizer FILE] [--donor DIR [--donor-tokenizer FILE]]
//       [--circuit FILE] [--address BLOCK] [--reader L:H] [--sources LIST] [--no-embedding]
//       [--fit N] [--per-config N] [--curve LIST] [--variant V] [--seed S | --seeds LIST] [--shard I/N]
//       [--resume] [--no-progress] --out DIR

#include <hylens/experiments/merge_by_kind.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/experiments/query_map_study.hpp>
#include <hylens/experiments/study_folder.hpp>
#include <hylens/interp/circuit.hpp>
#include <hylens/models/load.hpp>
#include <hylens/version.hpp>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "experiment_transplant.hpp"
#include "study_mpi.hpp"

namespace hylens::cli {

/// argv[1] is "query-map".
inline int run_experiment_query_map(int argc, char** argv) {
    namespace ex = experiments;
    namespace td = transplant_detail;
    CLI::App app("query-vector transfer (exp26): ridge maps from a donor's final-position features to the receiver's "
                 "Address-layer mixer outputs, with self, shuffled, mean and embedding controls and learning curves",
                 "hylens experiment query-map");
    LookupStudyArgs a;
    a.add(app);
    a.add_seeds(app);
    std::string donor_dir, donor_tokenizer, circuit, address, reader, sources;
    std::size_t fit = 2000;
    std::vector<std::size_t> curve;
    bool no_embedding = false;
    long group_size = -1;
    CLI::Option* don = app.add_option("--donor", donor_dir, "the donor's model folder (default: the receiver, --model, itself)")
                           ->check(CLI::ExistingDirectory);
    app.add_option("--donor-tokenizer", donor_tokenizer, "the donor's tokenizer.json (default: the donor folder's)")
        ->check(CLI::ExistingFile)
        ->needs(don);
    app.add_option("--circuit", circuit, "the receiver's circuit.json: its Address layers and reader head")
        ->check(CLI::ExistingFile);
    app.add_option("--address", address, "the receiver's Address layers as one block (G<i>, a-b, layers joined by +); "
                                         "default: the circuit's, else the receiver's last layer group");
    app.add_option("--reader", reader, "the receiver's reader head LAYER:HEAD (default: the circuit's)");
    app.add_option("--sources", sources, "donor source blocks, comma-separated (default: every donor layer group)");
    app.add_flag("--no-embedding", no_embedding, "leave out the donor's key embedding as a source");
    app.add_option("--group-size", group_size, "layers per group (default: 3 for Qwen3.5, else every linear layer "
                                               "since the previous softmax layer)")
        ->check(CLI::Range(0L, 1000L));
    app.add_option("--fit", fit, "fit prompts (K_fit keys)")->capture_default_str()->check(CLI::Range(std::size_t{10}, std::size_t{1000000}));
    app.add_option("--curve", curve, "learning-curve fit sizes, comma-separated (each in [10, --fit))")->delimiter(',');
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    ex::QueryMapOptions opt;
    try {
        ex::set_donor_host_variant(opt, a.variant, "query-map");
        td::check_block_syntax("--address", address);  // the rest is checked against the models
        check(address.empty() || ex::parse_block_spec(address).size() == 1, "--address '", address,
              "' names more than one block: the receiver's Address layers are one block (join layers with +)");
        td::check_block_syntax("--sources", sources);
        if (!reader.empty()) opt.reader = parse_reader(reader);
        if (!a.shard.empty()) opt.shard = ex::parse_shard(a.shard);
        for (std::size_t n : curve) check(n >= 10 && n < fit, "--curve: ", n, " is not in [10, --fit)");
        opt.seeds = a.seed_list();
    } catch (const Error& e) {
        std::cerr << "hylens experiment query-map: " << e.what() << "\n" << usage_line(app) << "\n";
        return 2;
    }
    opt.fit_items = fit;
    opt.per_config = a.per_config;
    opt.curve = curve;
    opt.embedding_source = !no_embedding;
    opt.resume = a.resume;
    opt.progress = !a.no_progress;
    const std::vector<std::string> all(argv - 1, argv + argc);
    return run_study_ranks(
        "query-map", opt.shard, !a.shard.empty(), a.out,
        [&](const StudyPlace& place) {
            const AnyModel recv = load_model(a.model);
            const std::filesystem::path tr = study_tokenizer_path(a.model, a.tokenizer);
            const Tokenizer tok_r = Tokenizer::from_file(tr.string());
            std::optional<AnyModel> donor_model;
            std::optional<Tokenizer> donor_tok;
            std::filesystem::path tdp = tr;
            if (!donor_dir.empty()) {
                donor_model.emplace(load_model(donor_dir));
                tdp = study_tokenizer_path(donor_dir, donor_tokenizer);
                donor_tok.emplace(Tokenizer::from_file(tdp.string()));
            }
            const AnyModel& dm = donor_model ? *donor_model : recv;
            const Tokenizer& tok_d = donor_tok ? *donor_tok : tok_r;
            const std::string rtype = recv.config().model_type, dtype = dm.config().model_type;
            ex::QueryMapOptions o = opt;
            o.shard = place.shard;
            o.out = place.out;
            o.vocabulary = ex::query_map_vocabulary(tok_r, donor_tok ? &*donor_tok : nullptr);
            if (!circuit.empty()) ex::use_circuit_roles(o, read_circuit_file(circuit), !reader.empty());
            o.run_info = study_run_info(a.model, rtype, tr, all, place.ranks, hylens::version);
            o.run_info["donor"] = donor_dir.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::filesystem::absolute(donor_dir).string());
            o.run_info["donor_model_type"] = dtype;
            o.run_info["donor_tokenizer"] = std::filesystem::absolute(tdp).string();
            o.run_info["circuit"] = circuit.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::filesystem::absolute(circuit).string());
            const ex::QueryMapResult r = recv.visit([&](const auto& rm) {
                return dm.visit([&](const auto& d) {
                    ex::set_query_map_blocks(o, rm, td::group_size_of(rtype, group_size), d, td::group_size_of(dtype, group_size),
                                             address, sources, o.circuit);
                    return ex::run_query_map_study(rm, tok_r, chat_format(ex::chat_family(rtype)), d, tok_d,
                                                   chat_format(ex::chat_family(dtype)), o);
                });
            });
            std::cerr << "hylens experiment query-map: " << r.items << " test pairs, " << r.records << " records (" << r.written
                      << " new, " << r.resumed << " resumed) -> " << o.out.string() << "\n";
        },
        experiments::merge_query_map_folders);
}

}  // namespace hylens::cli
