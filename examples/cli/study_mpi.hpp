#pragma once
// What the `hylens experiment <study>` commands share: the MPI job (rank r of N runs shard r/N
// into OUT/ranks/rank-r-of-N, rank 0 merges the rank folders into OUT), the model folder's
// tokenizer, and the error report of a study run. Built without HYLENS_WITH_MPI (or outside
// mpirun) a command is one process running the --shard it was given.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <hylens/core/error.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/experiments/reader_head.hpp>
#include <hylens/experiments/study_folder.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#ifdef HYLENS_WITH_MPI
#include <mpi.h>
#endif

namespace hylens::cli {

namespace detail {

/// Whether an MPI launcher started this process: mpirun / mpiexec (Open MPI, MPICH, Intel MPI,
/// MVAPICH) or srun with PMI or PMIx set one of these variables, and srun of several tasks sets
/// SLURM_STEP_NUM_TASKS (Slurm's own PMI-1 library reads Slurm's variables alone). `HYLENS_MPI`
/// decides instead where it is set: 1 initialises MPI in any case, 0 never.
inline bool launched_by_mpi() {
    if (const char* v = std::getenv("HYLENS_MPI"); v != nullptr) {
        const std::string_view s(v);
        check(s == "0" || s == "1", "HYLENS_MPI must be 0 or 1 (it is '", s, "')");
        return s == "1";
    }
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD", "MV2_COMM_WORLD_SIZE"})
        if (std::getenv(name) != nullptr) return true;
    const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
    return tasks != nullptr && std::string_view(tasks) != "1" && std::string_view(tasks) != "0" && *tasks != '\0';
}

/// Rank and size of the MPI job (0 and 1 without MPI or outside mpirun). A process no launcher
/// started is a job of one rank and does not initialise MPI: MPI_Init would start a singleton,
/// for which Open MPI spawns its runtime daemon (about 0.45 s of every study command, a third
/// of a short one's time), to compute what one process computes alone.
struct MpiJob {
    int rank = 0, size = 1, local_size = 1;
    bool owns_init = false;
    bool active = false;  ///< MPI initialised (by this job or before it)
    MpiJob() {
#ifdef HYLENS_WITH_MPI
        int init = 0;
        MPI_Initialized(&init);
        if (!init && !launched_by_mpi()) return;
        active = true;
        if (!init) {
            MPI_Init(nullptr, nullptr);
            owns_init = true;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
        MPI_Comm_size(local, &local_size);
        MPI_Comm_free(&local);
#endif
    }
    MpiJob(const MpiJob&) = delete;
    MpiJob& operator=(const MpiJob&) = delete;
    ~MpiJob() {
#ifdef HYLENS_WITH_MPI
        if (owns_init) MPI_Finalize();
#endif
    }
    /// True on every rank when `ok` holds on every rank.
    bool all(bool ok) const {
#ifdef HYLENS_WITH_MPI
        if (!active) return ok;
        int mine = ok ? 1 : 0, every = 0;
        MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        return every == 1;
#else
        return ok;
#endif
    }
};

}  // namespace detail

/// Where this process runs its part of a study.
struct StudyPlace {
    experiments::Shard shard;
    std::filesystem::path out;  ///< this process's result folder
    int ranks = 1;              ///< MPI ranks (1 outside mpirun)
};

/// Rank 0's merge of the rank folders into `out`; a refusal says where the ranks' finished
/// results are and how to merge them elsewhere.
template <class Merge>
experiments::MergeResult merge_ranks(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                     const Merge& merge) {
    try {
        return merge(dirs, out);
    } catch (const Error& e) {
        fail(e.what(), "; the ranks' results are in ", (out / "ranks").string(), ": merge them with 'hylens experiment merge ",
             (out / "ranks").string(), "/rank-* --out NEW_FOLDER'");
    }
}

/// Refuses to run over `ranks` ranks (1: one process) into `out` while out/ranks holds the
/// folders of a run over another number of ranks (a run.json or records): the rank folders are
/// named by N, so such a run ignored them and computed every record again beside them (a killed
/// `mpirun -np 2` resumed with -np 3, or alone, redid hours of work without a word).
inline void check_rank_layout(const std::filesystem::path& out, int ranks) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(out / "ranks", ec)) return;
    for (const auto& entry : fs::directory_iterator(out / "ranks", ec)) {
        const std::string name = entry.path().filename().string();
        const std::size_t of = name.rfind("-of-");
        if (name.rfind("rank-", 0) != 0 || of == std::string::npos) continue;
        const std::string count = name.substr(of + 4);
        if (count.empty() || count.size() > 6 || count.find_first_not_of("0123456789") != std::string::npos) continue;
        if (const int n = std::stoi(count); n == ranks || n < 2) continue;  // rank-r-of-1 is no mpirun's
        const fs::path items = entry.path() / "items.jsonl";
        const bool records = fs::exists(items, ec) && fs::file_size(items, ec) > 0;
        if (!records && !fs::exists(entry.path() / "run.json", ec)) continue;
        fail("[experiment] ", entry.path().string(), " holds part of a run of this folder over ", count,
             " MPI ranks; a run ", ranks > 1 ? "over " + std::to_string(ranks) + " ranks" : std::string("in one process"),
             " would run it again beside it: continue it with 'mpirun -np ", count,
             " ... --resume', or merge its ranks ('hylens experiment merge ", (out / "ranks").string(), "/rank-*-of-", count,
             " --out NEW_FOLDER') and remove ", (out / "ranks").string());
    }
}

/// Runs `study(place)` as shard `shard` into `out`, or, under mpirun with N > 1 ranks, as
/// shard r/N into out/ranks/rank-r-of-N on rank r, after which rank 0 calls merge(rank
/// folders, out). Errors are reported as "hylens experiment NAME: error: ..." (with the rank
/// under mpirun). Returns the exit code: 0, or 1 when any rank failed. Usage errors (exit 2)
/// are the caller's, before this.
inline int run_study_ranks(const std::string& name, const experiments::Shard& shard, bool shard_given,
                           const std::filesystem::path& out, const std::function<void(const StudyPlace&)>& study,
                           const std::function<experiments::MergeResult(const std::vector<std::filesystem::path>&,
                                                                        const std::filesystem::path&)>& merge) {
    detail::MpiJob mpi;
    StudyPlace place{shard, out, mpi.size};
    const auto rank_dir = [&](int r) {
        return out / "ranks" / ("rank-" + std::to_string(r) + "-of-" + std::to_string(mpi.size));
    };
    bool ok = true;
    std::string error;
    try {
        check_rank_layout(out, mpi.size);
        if (mpi.size > 1) {
            check(!shard_given, "--shard cannot be combined with mpirun: the ranks are the shards");
            place.shard = {static_cast<std::size_t>(mpi.rank), static_cast<std::size_t>(mpi.size)};
            place.out = rank_dir(mpi.rank);
            // Rank 0 merges into `out` once every rank is done: a folder the merge would refuse
            // (another run's result) is refused now, before the ranks run.
            experiments::detail::check_merge_target(out);
            // The ranks of a node share its cores.
            const std::size_t cores = ThreadPool::available_cores();
            ThreadPool::set_num_threads(std::max<std::size_t>(1, cores / static_cast<std::size_t>(mpi.local_size)));
        }
        study(place);
    } catch (const std::exception& e) {
        ok = false;
        error = e.what();
    }
    const bool all_ok = mpi.all(ok);
    if (!ok) {
        std::cerr << "hylens experiment " << name;
        if (mpi.size > 1) std::cerr << " (rank " << mpi.rank << ")";
        std::cerr << ": error: " << error << "\n";
        return 1;
    }
    if (!all_ok) return 1;
    if (mpi.size > 1 && mpi.rank == 0) {
        std::vector<std::filesystem::path> dirs;
        for (int r = 0; r < mpi.size; ++r) dirs.push_back(rank_dir(r));
        const experiments::MergeResult m = merge_ranks(dirs, out, merge);
        std::cerr << "hylens experiment " << name << ": rank 0 merged " << m.folders << " ranks, " << m.records
                  << " records -> " << out.string() << "\n";
    }
    return 0;
}

/// "L:H" -> the reader head (--reader of the lookup studies).
inline experiments::ReaderHead parse_reader(const std::string& s, const char* option = "--reader") {
    return experiments::parse_reader_head(s, option);
}

/// The tokenizer of a study: --tokenizer, or the model folder's tokenizer.json.
inline std::filesystem::path study_tokenizer_path(const std::string& model, const std::string& tokenizer) {
    const std::filesystem::path p =
        tokenizer.empty() ? std::filesystem::path(model) / "tokenizer.json" : std::filesystem::path(tokenizer);
    check(std::filesystem::exists(p), "[experiment] ", p.string(), " does not exist: the study renders text, pass --tokenizer FILE");
    return p;
}

/// The options every dictionary-lookup study takes (model, tokenizer, pairs, shard, resume, out).
struct LookupStudyArgs {
    std::string model, tokenizer, variant = "chat8", shard, out;
    std::size_t per_config = 20;
    std::uint64_t seed = 1;
    bool resume = false, no_progress = false;

    /// `long_variant`: the study takes the long variant (chat8 with filler text) too.
    void add(CLI::App& app, bool long_variant = false) {
        app.add_option("--model", model, "model folder (config.json + *.safetensors)")->required()->check(CLI::ExistingDirectory);
        app.add_option("--tokenizer", tokenizer, "tokenizer.json (default: the model folder's)")->check(CLI::ExistingFile);
        std::vector<std::string> variants{"chat4", "chat8", "chat16", "list8", "rev8", "perm8"};
        if (long_variant) variants.push_back("long");
        std::string names;
        for (const std::string& v : variants) names += (names.empty() ? "" : ", ") + v;
        app.add_option("--variant", variant, "prompt variant: " + names)->capture_default_str()->check(CLI::IsMember(variants));
        app.add_option("--per-config", per_config, "pairs drawn per (target, distractor) configuration")
            ->capture_default_str()
            ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
        app.add_option("--seed", seed, "data-generation seed")->capture_default_str();
        app.add_option("--shard", shard, "run shard I of N (items taken by draw index mod N)");
        app.add_flag("--resume", resume, "continue a killed run in --out (records already there are kept)");
        app.add_flag("--no-progress", no_progress, "no progress line on stderr");
        app.add_option("--out", out, "result folder")->required()->check(result_folder());
    }

    /// --seeds LIST (instead of --seed) for the studies that pool seeds (transplant,
    /// query-map, circuit): their summaries hold the pooled interval and the per-seed means with their sd.
    std::vector<std::uint64_t> seeds;
    void add_seeds(CLI::App& app) {
        app.add_option("--seeds", seeds, "data-generation seeds, comma-separated: the summaries pool them and give "
                                         "each seed's mean and their sd (instead of --seed)")
            ->delimiter(',')
            ->excludes("--seed");
    }
    /// The seeds of the run: --seeds, or --seed alone; a seed listed twice is an error.
    std::vector<std::uint64_t> seed_list() const {
        if (seeds.empty()) return {seed};
        experiments::check_distinct_seeds(seeds, "--seeds");
        return seeds;
    }
};

/// run.json's description of the run: the model, its tokenizer, the tool's version, the
/// command line and the MPI ranks.
inline nlohmann::json study_run_info(const std::string& model, const std::string& model_type,
                                     const std::filesystem::path& tokenizer, const std::vector<std::string>& arguments,
                                     int ranks, const char* version) {
    return {{"model", std::filesystem::absolute(model).string()},
            {"model_type", model_type},
            {"tokenizer", std::filesystem::absolute(tokenizer).string()},
            {"hylens_version", version},
            {"arguments", arguments},
            {"mpi_ranks", ranks}};
}

/// The report line of `hylens experiment merge` for a study's merge.
inline int report_merge(const experiments::MergeResult& m, const std::string& out) {
    std::cerr << "hylens experiment merge: " << m.folders << " folders, " << m.records << " records"
              << (m.incomplete ? " (" + std::to_string(m.incomplete) + " folders not complete)" : std::string())
              << (m.missing_shards ? " (" + std::to_string(m.missing_shards) + " shards missing: a partial result, run.json "
                                     "status \"incomplete\", missing_shards)"
                                   : std::string())
              << " -> " << out << "\n";
    return 0;
}

}  // namespace hylens::cli
