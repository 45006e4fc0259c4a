#pragma once
// hylens experiment stitch: a donor model's block replaces a host block of another family
// through ridge adapters fitted on aligned text (protocols.md §A.11, exp27 / exp34), scored
// under every condition on dictionary lookups and held-out perplexity. See docs/study_stitch.md.
//
//   hylens experiment stitch --host DIR --donor DIR [--host-tokenizer F] [--donor-tokenizer F]
//       --host-block A-B[,C-D...] --donor-block A-B[,C-D...] [--corpus FILE] [--variant chat8]
//       [--fit-prompts N] [--fit-tokens N] [--test-items N] [--ppl-seqs N] [--ppl-len N]
//       [--conditions LIST] [--other-blocks LIST] [--reader L:H] [--seed S | --seeds LIST] [--shard I/N] [--resume]
//       [--no-progress] --out DIR

#include <hylens/experiments/merge_by_kind.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/experiments/stitch_study.hpp>
#include <hylens/models/load.hpp>
#include <hylens/tasks/lookup/fit_corpus.hpp>
#include <hylens/version.hpp>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "study_mpi.hpp"

namespace hylens::cli {

/// argv[1] is "stitch".
inline int run_experiment_stitch(int argc, char** argv) {
    namespace ex = experiments;
    CLI::App app("cross-family block stitching (exp27 / exp34): ridge adapters fitted on aligned text, every condition "
                 "scored on dictionary lookups and held-out perplexity; items.jsonl, summary.csv/json, "
                 "adapters.safetensors, run.json",
                 "hylens experiment stitch");
    std::string host, donor, host_tok, donor_tok, host_block, donor_block, corpus, variant = "chat8", conditions,
        other_blocks, shard, out;
    ex::StitchStudyOptions opt;
    bool no_progress = false;
    app.add_option("--host", host, "host (receiver) model folder")->required()->check(CLI::ExistingDirectory);
    app.add_option("--donor", donor, "donor model folder")->required()->check(CLI::ExistingDirectory);
    app.add_option("--host-tokenizer", host_tok, "the host's tokenizer.json (default: the host folder's)")
        ->check(CLI::ExistingFile);
    app.add_option("--donor-tokenizer", donor_tok, "the donor's tokenizer.json (default: the donor folder's)")
        ->check(CLI::ExistingFile);
    app.add_option("--host-block", host_block, "host layers replaced, one range per slot: A-B[,C-D...]")->required();
    app.add_option("--donor-block", donor_block, "donor layers stitched in, one range per slot: A-B[,C-D...]")->required();
    app.add_option("--corpus", corpus,
                   "English text (plain or .gz) to fit on and measure perplexity on (default: " +
                       std::string(tasks::lookup::fit_corpus_default_path) + " of the Debian package " +
                       std::string(tasks::lookup::fit_corpus_package) + ")")
        ->check(CLI::ExistingFile);
    app.add_option("--variant", variant, "dictionary style: chat4, chat8, chat16, list8, rev8")
        ->capture_default_str()
        ->check(CLI::IsMember({"chat4", "chat8", "chat16", "list8", "rev8"}));
    app.add_option("--fit-prompts", opt.fit_prompts, "fit dictionaries (K_fit keys)")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{0}, std::size_t{1000000}));
    app.add_option("--fit-tokens", opt.fit_tokens, "host tokens of fit-corpus chunks")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{0}, std::size_t{100000000}));
    app.add_option("--test-items", opt.test_items, "test dictionaries (K_test keys)")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
    app.add_option("--ppl-seqs", opt.ppl_seqs, "held-out perplexity sequences")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{0}, std::size_t{100000}));
    app.add_option("--ppl-len", opt.ppl_len, "tokens per perplexity sequence")
        ->capture_default_str()
        ->check(CLI::Range(std::size_t{2}, std::size_t{1000000}));
    app.add_option("--conditions", conditions,
                   "comma-separated: intact, removed, mixers_zeroed, bypass, stitched, donor_no_mixing, donor:A-B "
                   "(default: all six and donor:L for every donor layer outside a single-slot donor block)");
    app.add_option("--other-blocks", other_blocks, "donor blocks of the default donor:A-B conditions, A-B[,C-D...]");
    std::string reader;
    app.add_option("--reader", reader, "the host's reader head LAYER:HEAD: each lookup record's att_target, its "
                                       "attention from the final position on the queried entry");
    std::uint64_t seed = 1;
    std::vector<std::uint64_t> seeds;
    app.add_option("--seed", seed, "seed of the key split, fit and test dictionaries")->capture_default_str();
    app.add_option("--seeds", seeds, "several seeds, comma-separated: each redraws the key split, the fit and test "
                                     "dictionaries and refits every map; the summary pools them and gives each seed's "
                                     "value and their sd (instead of --seed)")
        ->delimiter(',')
        ->excludes("--seed");
    app.add_option("--shard", shard, "run shard I of N (test items, then perplexity sequences, taken by index mod N)");
    app.add_flag("--resume", opt.resume, "continue a killed run in --out (records already there are kept)");
    app.add_flag("--no-progress", no_progress, "no progress line on stderr");
    app.add_option("--out", out, "result folder")->required()->check(result_folder());
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    try {
        if (!shard.empty()) opt.shard = ex::parse_shard(shard);
        opt.host_blocks = ex::parse_layer_ranges(host_block);
        opt.donor_blocks = ex::parse_layer_ranges(donor_block);
        check(opt.host_blocks.size() == opt.donor_blocks.size(), "--host-block has ", opt.host_blocks.size(),
              " ranges and --donor-block ", opt.donor_blocks.size(), ": give one of each per slot");
        if (!other_blocks.empty()) opt.other_blocks = ex::parse_layer_ranges(other_blocks);
        if (!reader.empty()) opt.reader = parse_reader(reader);
        opt.seeds = seeds.empty() ? std::vector<std::uint64_t>{seed} : seeds;
        ex::check_distinct_seeds(opt.seeds, "--seeds");
        for (std::size_t b = 0; !conditions.empty() && b <= conditions.size();) {
            std::size_t e = conditions.find(',', b);
            if (e == std::string::npos) e = conditions.size();
            opt.conditions.push_back(conditions.substr(b, e - b));
            b = e + 1;
        }
        ex::check_stitch_conditions(opt.conditions, opt.host_blocks.size());  // before the models load
    } catch (const Error& e) {
        std::cerr << "hylens experiment stitch: " << e.what() << "\n" << usage_line(app) << "\n";
        return 2;
    }
    opt.variant = variant;
    opt.progress = !no_progress;
    const std::vector<std::string> all(argv - 1, argv + argc);
    return run_study_ranks(
        "stitch", opt.shard, !shard.empty(), out,
        [&](const StudyPlace& place) {
            const tasks::lookup::FitCorpus text =
                corpus.empty() ? tasks::lookup::read_fit_corpus() : tasks::lookup::read_fit_corpus(corpus);
            const AnyModel h = load_model(host), d = load_model(donor);
            const std::filesystem::path htp = study_tokenizer_path(host, host_tok), dtp = study_tokenizer_path(donor, donor_tok);
            const Tokenizer ht = Tokenizer::from_file(htp.string()), dt = Tokenizer::from_file(dtp.string());
            const ChatFamily hf = ex::chat_family(h.config().model_type), df = ex::chat_family(d.config().model_type);
            ex::StitchStudyOptions o = opt;
            o.shard = place.shard;
            o.out = place.out;
            o.run_info = {{"host", std::filesystem::absolute(host).string()},
                          {"host_type", h.config().model_type},
                          {"host_tokenizer", std::filesystem::absolute(htp).string()},
                          {"donor", std::filesystem::absolute(donor).string()},
                          {"donor_type", d.config().model_type},
                          {"donor_tokenizer", std::filesystem::absolute(dtp).string()},
                          {"hylens_version", hylens::version},
                          {"arguments", all},
                          {"mpi_ranks", place.ranks}};
            const ex::StitchStudyResult r = h.visit([&](const auto& hm) {
                return d.visit([&](const auto& dm) { return ex::run_stitch_study(hm, ht, hf, dm, dt, df, text, o); });
            });
            std::cerr << "hylens experiment stitch: " << r.records << " records (" << r.written << " new, " << r.resumed
                      << " resumed) in " << r.seconds << " s -> " << o.out.string() << "\n";
        },
        experiments::merge_stitch_folders);
}

}  // namespace hylens::cli
