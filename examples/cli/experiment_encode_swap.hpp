#pragma once
// hylens experiment encode-swap: the Encode (Bind) sufficiency swaps of exp29 with the Encode
// block of a circuit file (hylens experiment circuit). See docs/study_circuit.md.
//
//   hylens experiment encode-swap --model DIR --circuit FILE [--tokenizer FILE] [--variant chat8]
//       [--per-config N] [--seed S] [--other-layers L,L...] [--shard I/N] [--resume] [--no-progress]
//       --out DIR

#include <hylens/experiments/encode_swap_study.hpp>
#include <hylens/experiments/merge_by_kind.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>
#include <hylens/version.hpp>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "study_mpi.hpp"

namespace hylens::cli {

/// argv[1] is "encode-swap".
inline int run_experiment_encode_swap(int argc, char** argv) {
    namespace ex = experiments;
    CLI::App app("Encode (Bind) sufficiency swaps (exp29): the Encode block's writes, the token embeddings, another "
                 "block's writes or the mean write at the value / key tokens; items.jsonl, summary.csv/json, run.json",
                 "hylens experiment encode-swap");
    LookupStudyArgs a;
    a.add(app);
    std::string circuit;
    std::vector<LayerIndex> other;
    app.add_option("--circuit", circuit, "circuit.json of hylens experiment circuit on this model (its Encode block)")
        ->required()
        ->check(CLI::ExistingFile);
    CLI::Option* other_opt = app.add_option("--other-layers", other,
                                            "the control block's layers, comma-separated (default: the circuit's Address "
                                            "block when it is not the Encode block)")
                                 ->delimiter(',');
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    ex::EncodeSwapOptions opt;
    try {
        if (!a.shard.empty()) opt.shard = ex::parse_shard(a.shard);
    } catch (const Error& e) {
        std::cerr << "hylens experiment encode-swap: " << e.what() << "\n" << usage_line(app) << "\n";
        return 2;
    }
    opt.variant = a.variant;
    opt.per_config = a.per_config;
    opt.seed = a.seed;
    opt.resume = a.resume;
    opt.progress = !a.no_progress;
    const std::vector<std::string> all(argv - 1, argv + argc);
    return run_study_ranks(
        "encode-swap", opt.shard, !a.shard.empty(), a.out,
        [&](const StudyPlace& place) {
            ex::EncodeSwapOptions o = opt;
            ex::set_encode_swap_roles(o, read_circuit_file(circuit),
                                      other_opt->count() ? std::optional(other) : std::nullopt);
            const AnyModel m = load_model(a.model);
            const std::filesystem::path tok_path = study_tokenizer_path(a.model, a.tokenizer);
            const Tokenizer tok = Tokenizer::from_file(tok_path.string());
            const std::string type = m.config().model_type;
            o.shard = place.shard;
            o.out = place.out;
            o.run_info = study_run_info(a.model, type, tok_path, all, place.ranks, hylens::version);
            o.run_info["circuit"] = std::filesystem::absolute(circuit).string();
            const ex::EncodeSwapResult r =
                m.visit([&](const auto& typed) { return ex::run_encode_swap_study(typed, tok, ex::chat_family(type), o); });
            std::cerr << "hylens experiment encode-swap: " << r.items << " pairs (" << r.key_items << " with a key swap)"
                      << (o.shard.count > 1 ? " in the study (every shard), " : ", ")
                      << r.records << " records (" << r.written << " new, " << r.resumed << " resumed) in " << r.seconds
                      << " s -> " << o.out.string() << "\n";
        },
        experiments::merge_encode_swap_folders);
}

}  // namespace hylens::cli
