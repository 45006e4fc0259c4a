#pragma once
// hylens bench: the llama-bench counterpart for any model folder. Prefill (pp<N>) and decode
// (tg<N>) tokens/s over repetitions, and beside each the floor measured in the same run and
// the achieved fraction of it:
//  * prefill: the rate of the pool's float32 many-row product (kernels::linear: our own GEMM
//    at levels avx2 and up, OpenBLAS sgemm at baseline; best of 5, GFLOP/s, [512 x 1024] x
//    [2048 x 1024]^T), turned into tokens/s with the matrix FLOPs of the test: 2 x (weight
//    elements) per token for every matrix but the output head, whose 2 x (elements) count once
//    (the logits of the last token only; until 2026-12-03 the head counted per token, which
//    overstated the fraction by up to 1.5x for a large vocabulary); attention and recurrence
//    FLOPs are not counted, so the fraction is a slight underestimate; with
//    --bf16-activations on a checkpoint of bf16 matrices, the rate of the same product with a
//    bf16 weight and rounded activations (kernels::linear: VDPBF16PS at level avx512bf16);
//  * decode: the pool's read bandwidth (best of 5, GB/s, dispatched dot products over a 256 MiB buffer),
//    turned into tokens/s with the bytes a decode step must read: every tensor of the
//    checkpoint except an untied embedding table (of which one row is read).
// Each floor is measured right before and right after its test, and the better of the two is
// the floor; their ratio (floor_spread) says whether the machine's rate held through the test.
// It is also measured between the repetitions: each repetition's paired floor is the better of
// the measurements just before and just after it, and paired_fraction_of_floor the median of
// the repetitions' tokens/s over their paired floors, a fraction that holds up on a machine
// whose rate moves between repetitions (a shared host's memory bandwidth can move 1.5x within
// a minute: docs/performance.md).
// Like llama-bench: pp runs the prompt on a fresh cache (logits of the last token only); tg
// feeds n tokens one at a time on a fresh cache. Token ids are fixed pseudo-random (splitmix64).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <hylens/core/error.hpp>
#include <hylens/core/precision.hpp>
#include <hylens/core/simd.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/io/checkpoint.hpp>
#include <hylens/kernels/linear.hpp>
#include <hylens/kernels/matvec.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/sampling.hpp>  // SplitMix64

#include <sys/mman.h>  // mmap, madvise: the read floor's buffer

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

namespace bench_detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Weight traffic of one model: bytes a decode step reads, and matrix elements (FLOPs / 2 per
/// token), of which bf16_matrix_elements are bf16 and head_elements the output head's (the
/// lm_head, or the embedding table when tied).
struct ModelTraffic {
    double decode_bytes = 0;
    double matrix_elements = 0;
    double bf16_matrix_elements = 0;
    double head_elements = 0;
};

/// The matrix FLOPs of a pp<n> test: every matrix but the head once per token, the head once
/// (the test asks for the logits of the last token only, as llama-bench's does).
inline double prefill_flops(const ModelTraffic& t, std::size_t n) {
    return 2 * ((t.matrix_elements - t.head_elements) * static_cast<double>(n) + t.head_elements);
}

inline ModelTraffic model_traffic(const std::filesystem::path& dir, bool tied) {
    const io::Checkpoint ck = io::Checkpoint::open(dir);
    ModelTraffic t;
    for (const auto& name : ck.names()) {
        const io::TensorInfo& info = ck.info(name);
        const bool embedding = name.find("embed_tokens") != std::string::npos || name.find("embeddings") != std::string::npos;
        if (name.find("visual") != std::string::npos || name.find("mtp.") == 0) continue;  // not run by the LM
        double elems = 1;
        for (auto d : info.shape) elems *= static_cast<double>(d);
        if (embedding && !tied) {
            t.decode_bytes += static_cast<double>(info.nbytes) / static_cast<double>(info.shape.empty() ? 1 : info.shape[0]);
            continue;
        }
        t.decode_bytes += static_cast<double>(info.nbytes);
        if (info.shape.size() == 2 && info.shape[0] > 1 && info.shape[1] > 1) {
            t.matrix_elements += elems;
            if (info.dtype == DType::BF16) t.bf16_matrix_elements += elems;
            if (embedding || name.find("lm_head") != std::string::npos) t.head_elements += elems;
        }
    }
    return t;
}

/// Bytes of cache one decode step moves besides the weights, in a run of n_gen tokens from an
/// empty cache: every recurrent state and convolution window read and written once per token,
/// and per attention layer the K and V of the earlier positions read (their mean over the run,
/// (n_gen - 1) / 2) and the new position's written (its read back by its own attention is not
/// counted again). At the perf shapes the caches are 2.8 % (Qwen3.5-0.8B) and 6.7 %
/// (Granite-4.0-H-350M) of the BF16 weights' bytes (docs/performance.md, "`hylens bench`").
template <class Cache>
double cache_bytes_per_token(const Cache& cache, std::size_t n_gen) {
    double bytes = 0;
    const double mean_len = 0.5 * static_cast<double>(n_gen > 0 ? n_gen - 1 : 0);
    for (std::size_t i = 0; i < cache.num_layers(); ++i)
        cache.visit(i, [&](const auto& c) {
            for_each_recurrent_part(c, [&](const RecurrentCache& r) {
                const double floats =
                    static_cast<double>(r.batch() * (r.state_size() + r.conv_channels() * r.conv_width()));
                bytes += 2 * floats * sizeof(float);
            });
            for_each_kv_part(c, [&](const KVCache& kv) {
                const double per_position =
                    2.0 * static_cast<double>(kv.batch() * kv.kv_heads() * kv.head_dim()) * sizeof(float);
                bytes += per_position * (mean_len + 1);
            });
        });
    return bytes;
}

// The best of reps rates in GFLOP/s of product(A, C) = [512 x 1024] x [2048 x 1024]^T, after
// one warm-up (a floor is what the machine can do; on a shared machine the median would drop
// with the neighbours' load and flatter the fraction).
template <class Product>
double best_gflops(int reps, Product product) {
    const std::size_t M = 512, N = 2048, K = 1024;
    const std::vector<float> A(M * K, 0.5f);
    std::vector<float> C(M * N);
    product(A.data(), C.data());
    std::vector<double> r;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        product(A.data(), C.data());
        r.push_back(2.0 * M * N * K / seconds_since(t0) * 1e-9);
    }
    return *std::max_element(r.begin(), r.end());
}

/// The rate of kernels::linear with a float32 weight (the prefill projections' product at the
/// active level) in GFLOP/s, best of reps.
inline double f32_gemm_gflops(int reps) {
    const Weight B = Weight::from_floats(std::vector<float>(2048 * 1024, 0.25f), {2048, 1024}, "floor");
    return best_gflops(reps, [&](const float* A, float* C) { kernels::linear(A, 1024, 512, B, nullptr, C, 2048); });
}

/// The same rate for a bf16 weight with rounded activations (precision::round_activations()
/// must be on): kernels::linear.
inline double bf16_gemm_gflops(int reps) {
    const Weight B = Weight::from_floats_bf16(std::vector<float>(2048 * 1024, 0.25f), {2048, 1024}, "floor");
    return best_gflops(reps, [&](const float* A, float* C) { kernels::linear(A, 1024, 512, B, nullptr, C, 2048); });
}

/// An anonymous mapping of n floats advised for huge pages before the first touch, as the
/// weights of --no-mmap (io/mmap.hpp): with transparent huge pages on `madvise`, a std::vector's
/// 4 KiB pages read slower (TLB misses), and a floor read from them was beaten by the decode
/// of weights held in huge pages (docs/performance.md).
class HugePageFloats {
   public:
    explicit HugePageFloats(std::size_t n) : n_(n) {
        void* p = ::mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        check(p != MAP_FAILED, "[bench] cannot allocate ", n * sizeof(float), " bytes for the read floor");
#ifdef MADV_HUGEPAGE
        (void)::madvise(p, n * sizeof(float), MADV_HUGEPAGE);
#endif
        p_ = static_cast<float*>(p);
        std::fill(p_, p_ + n, 1.0f);
    }
    ~HugePageFloats() { ::munmap(p_, n_ * sizeof(float)); }
    HugePageFloats(const HugePageFloats&) = delete;
    HugePageFloats& operator=(const HugePageFloats&) = delete;
    float* data() const noexcept { return p_; }
    std::size_t size() const noexcept { return n_; }

   private:
    float* p_ = nullptr;
    std::size_t n_ = 0;
};

/// The pool's read bandwidth in GB/s, best of reps: the decode kernel's access pattern
/// (rows of a matrix dotted with one vector) over a buffer far larger than the caches.
inline double read_gbps(int reps) {
    const std::size_t in = 4096, rows = (std::size_t{256} << 20) / (in * sizeof(float));
    HugePageFloats W(rows * in);
    std::vector<float> x(in, 1.0f), y(rows);
    kernels::matvec(x.data(), in, 1, W.data(), rows, in, y.data(), rows);  // warm-up
    std::vector<double> r;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        kernels::matvec(x.data(), in, 1, W.data(), rows, in, y.data(), rows);
        r.push_back(static_cast<double>(W.size() * sizeof(float)) / seconds_since(t0) * 1e-9);
    }
    return *std::max_element(r.begin(), r.end());
}

inline std::vector<std::int64_t> bench_tokens(std::size_t n, std::size_t vocab, std::uint64_t seed) {
    std::vector<std::int64_t> ids(n);
    SplitMix64 rng(seed);
    for (auto& id : ids) id = static_cast<std::int64_t>(rng.next() % vocab);
    return ids;
}

struct Result {
    std::string test;
    std::size_t threads = 0, n_prompt = 0, n_gen = 0;
    std::vector<double> samples;
    std::string floor_name;
    std::vector<double> floor_rates{};         // best of 5 before each repetition and after the last
    double floor_ts = 0;                       // floor_rate() as tokens/s
    std::vector<double> paired_fractions{};    // each repetition's tokens/s over its paired floor

    /// The floor measured right before the test and right after it.
    double floor_before() const { return floor_rates.front(); }
    double floor_after() const { return floor_rates.back(); }
    /// The test's floor: the better of those two.
    double floor_rate() const { return std::max(floor_before(), floor_after()); }
    double weight_bytes = 0, cache_bytes = 0;  // per decode token (tg rows only)
    double matrix_elements = 0, head_elements = 0;  // what the prefill floor counts (pp rows only)
    // The pool's parallel regions over the timed runs (ThreadPool::RegionStats, summed), the
    // tokens and the seconds of those runs.
    double regions = 0, wait_seconds = 0, between_seconds = 0, timed_seconds = 0, tokens = 0;

    /// Times one run of `tokens` tokens (run()), its seconds and the pool's regions counted.
    template <class Run>
    void time_run(std::size_t n_tokens, Run run) {
        ThreadPool& pool = ThreadPool::instance();
        pool.reset_region_stats();
        const auto t0 = Clock::now();
        run();
        const double s = seconds_since(t0);
        const ThreadPool::RegionStats st = pool.region_stats();
        samples.push_back(static_cast<double>(n_tokens) / s);
        regions += static_cast<double>(st.regions);
        wait_seconds += st.wait_seconds;
        between_seconds += st.between_seconds;
        timed_seconds += s;
        tokens += static_cast<double>(n_tokens);
    }
};

/// The lower of the floor's two measurements over the higher: near 1 when the machine's rate
/// held through the test; well below it when it moved (a neighbour's load came or went), and
/// then the fraction of the floor says little.
inline double floor_spread(const Result& r) {
    return std::min(r.floor_before(), r.floor_after()) / std::max(r.floor_before(), r.floor_after());
}

/// Runs `reps` repetitions of the test (repetition(), which times itself into r.samples) with a
/// measurement of the floor (rate(): best of 5) before each and after the last. The floor is the
/// better of the first and the last measurement; each repetition's paired floor the better of
/// the two around it. tokens_per_s_of(rate) turns a rate into the floor's tokens/s.
template <class Rate, class Repetition, class TokensPerS>
void measure(Result& r, int reps, Rate rate, Repetition repetition, TokensPerS tokens_per_s_of) {
    r.floor_rates.push_back(rate());
    for (int i = 0; i < reps; ++i) {
        repetition();
        r.floor_rates.push_back(rate());
    }
    r.floor_ts = tokens_per_s_of(r.floor_rate());
    for (std::size_t i = 0; i < r.samples.size(); ++i)
        r.paired_fractions.push_back(r.samples[i] / tokens_per_s_of(std::max(r.floor_rates[i], r.floor_rates[i + 1])));
}

inline void print_json(const Result& r, const std::string& model, const std::string& level, bool in_memory) {
    nlohmann::json j;
    j["model"] = model;
    j["test"] = r.test;
    j["threads"] = r.threads;
    j["n_prompt"] = r.n_prompt;
    j["n_gen"] = r.n_gen;
    j["simd"] = level;
    j["bf16_activations"] = precision::round_activations();
    j["weights"] = in_memory ? "in_memory" : "mapped";
    j["samples_ts"] = r.samples;
    j["min_ts"] = *std::min_element(r.samples.begin(), r.samples.end());
    j["median_ts"] = median(r.samples);
    j["max_ts"] = *std::max_element(r.samples.begin(), r.samples.end());
    j["floor_name"] = r.floor_name;
    j["floor_rate"] = r.floor_rate();
    j["floor_rate_before"] = r.floor_before();
    j["floor_rate_after"] = r.floor_after();
    j["floor_spread"] = floor_spread(r);
    j["floor_value"] = r.floor_ts;
    j["fraction_of_floor"] = median(r.samples) / r.floor_ts;
    j["floor_rates"] = r.floor_rates;
    j["paired_fractions"] = r.paired_fractions;
    j["paired_fraction_of_floor"] = median(r.paired_fractions);
    if (r.n_gen > 0) {  // the bytes of one decode step the read floor divides
        j["weight_bytes"] = r.weight_bytes;
        j["cache_bytes"] = r.cache_bytes;
    }
    if (r.n_prompt > 0) {  // the matrices the GEMM floor counts: the head once, the rest per token
        j["matrix_elements"] = r.matrix_elements;
        j["head_elements"] = r.head_elements;
    }
    // What the thread pool's parallel regions cost the calling thread in the timed runs: regions
    // a token, and the fractions of the time it waited at their ends for the other threads and
    // spent between them (its serial work, the others idle). All 0 at 1 thread.
    j["pool_regions_per_token"] = r.regions / r.tokens;
    j["pool_wait_fraction"] = r.wait_seconds / r.timed_seconds;
    j["pool_between_fraction"] = r.between_seconds / r.timed_seconds;
    std::cout << j.dump() << std::endl;
}

inline void print_row(const Result& r) {
    const double med = median(r.samples);
    std::ostringstream line;
    line << std::fixed << std::setprecision(2) << std::left << std::setw(8) << r.test << std::right << std::setw(4)
         << r.threads << std::setw(10) << *std::min_element(r.samples.begin(), r.samples.end()) << std::setw(10) << med
         << std::setw(10) << *std::max_element(r.samples.begin(), r.samples.end()) << "   " << std::setw(18)
         << r.floor_name << std::setw(9) << r.floor_rate() << std::setw(10) << r.floor_ts << std::setw(8)
         << med / r.floor_ts << std::setw(8) << floor_spread(r) << std::setw(8) << median(r.paired_fractions)
         << std::setw(9) << std::setprecision(0)
         << r.regions / r.tokens << std::setprecision(1) << std::setw(7) << 100 * r.wait_seconds / r.timed_seconds
         << std::setw(8) << 100 * r.between_seconds / r.timed_seconds;
    std::cout << line.str() << std::endl;
}

}  // namespace bench_detail

inline int run_bench(int argc, char** argv) {
    using namespace bench_detail;
    std::string dir;
    std::size_t n_prompt = 512, n_gen = 64;
    std::vector<std::size_t> threads{ThreadPool::instance().size()};
    int reps = 3;
    bool json = false, bf16_flag = false, no_mmap = false;
    std::string simd_level = "native";
    CLI::App app{"Measures prefill (pp<N>) and decode (tg<N>) tokens/s of the model folder DIR, with min / median / "
                 "max over repetitions, and beside each the floor measured in the same run (the float32 or bf16 GEMM "
                 "GFLOP/s for prefill, read bandwidth for decode) as tokens/s and the achieved fraction of it.",
                 "hylens bench"};
    app.add_option("--model", dir, "model folder (config.json + *.safetensors)")->required();
    app.add_option("-p,--n-prompt", n_prompt, "prompt tokens of the prefill test, 0 to skip (default 512)")
        ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
    app.add_option("-n,--n-gen", n_gen, "tokens of the decode test, 0 to skip (default 64)")
        ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
    app.add_option("-t,--threads", threads, "thread counts, comma-separated (default: the cores this process may run on, or HYLENS_THREADS)")
        ->delimiter(',')
        ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
    app.add_option("-r,--repetitions", reps, "repetitions of each test (default 3)")->check(CLI::Range(1, 1000));
    CLI::Option* simd_opt =
        app.add_option("--simd", simd_level, "instruction-set level: baseline, avx2, avx512, avx512bf16, native (default: "
                                             "HYLENS_SIMD, else native)")
            ->check(CLI::IsMember({"baseline", "avx2", "avx512", "avx512bf16", "native"}));
    app.add_flag("--bf16-activations", bf16_flag,
                 "round the input of every product with a bf16 weight to bf16 (llama.cpp's BF16 arithmetic; "
                 "docs/performance.md; also HYLENS_BF16_ACTIVATIONS=1)");
    add_no_mmap(app, no_mmap);
    app.add_flag("--json", json, "one JSON object per line and per (test, threads) instead of the table");
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    // The options win; without them HYLENS_SIMD and HYLENS_BF16_ACTIVATIONS apply, as in every
    // other command (bench forced native and float32 activations over them, without a word).
    if (simd_opt->count() > 0) simd::force(simd::parse_level(simd_level));
    std::optional<precision::RoundActivations> rounding;
    if (bf16_flag) rounding.emplace(true);
    const bool bf16_activations = precision::round_activations();
    const std::string level = simd::level_name(simd::active());
    const AnyModel model = load_model(dir, load_options(no_mmap));
    const std::size_t vocab = model.config().vocab;
    bool tied = false;
    double cache_bytes = 0;  // of one decode step (the n_gen-token run's mean)
    model.visit([&](const auto& m) {
        tied = m.tied_embeddings();
        cache_bytes = cache_bytes_per_token(m.new_cache(), n_gen);
    });
    const ModelTraffic traffic = model_traffic(dir, tied);
    // The prefill floor of the arithmetic the matrices run in: bf16 products when most of them
    // are bf16 and their activations are rounded.
    const bool bf16_floor = bf16_activations && traffic.bf16_matrix_elements * 2 > traffic.matrix_elements;
    const std::string model_name = std::filesystem::path(dir).filename().string();
    if (!json)
        std::cout << "model " << dir << "  simd " << level << (bf16_activations ? "  bf16 activations" : "")
                  << (no_mmap ? "  weights in memory" : "")
                  << "  decode moves " << std::setprecision(4) << (traffic.decode_bytes + cache_bytes) / 1e9
                  << " GB/token (weights " << traffic.decode_bytes / 1e9 << ", caches " << cache_bytes / 1e9
                  << "), prefill " << 2 * (traffic.matrix_elements - traffic.head_elements) / 1e9
                  << " GFLOP/token + " << 2 * traffic.head_elements / 1e9 << " for the last token's logits\n"
                  << "test    thr    min t/s  med t/s   max t/s   floor             rate    floor t/s  frac  spread  paired  regions wait %  betw %\n";
    const auto prompt = bench_tokens(std::max<std::size_t>(n_prompt, 1), vocab, 1);
    const auto gen = bench_tokens(std::max<std::size_t>(n_gen, 1), vocab, 2);
    for (const std::size_t t : threads) {
        ThreadPool::instance().resize(t);
        model.visit([&](const auto& m) {
            ForwardOptions last;
            last.last_only = true;
            {  // warm-up: pages the weights in, sizes the workspaces
                auto cache = m.new_cache();
                (void)m.forward(TokenBatch(std::vector<std::int64_t>(prompt.begin(), prompt.begin() + std::min<std::size_t>(prompt.size(), 16))), cache, last);
            }
            if (n_prompt > 0) {
                Result r{"pp" + std::to_string(n_prompt), t, n_prompt, 0, {},
                         bf16_floor ? "bf16_gemm_gflops" : "f32_gemm_gflops"};
                r.matrix_elements = traffic.matrix_elements;
                r.head_elements = traffic.head_elements;
                measure(
                    r, reps, [&] { return bf16_floor ? bf16_gemm_gflops(5) : f32_gemm_gflops(5); },
                    [&] {
                        auto cache = m.new_cache();
                        r.time_run(n_prompt, [&] { (void)m.forward(TokenBatch(prompt), cache, last); });
                    },
                    [&](double gflops) { return gflops * 1e9 * static_cast<double>(n_prompt) / prefill_flops(traffic, n_prompt); });
                json ? print_json(r, model_name, level, no_mmap) : print_row(r);
            }
            if (n_gen > 0) {
                Result r{"tg" + std::to_string(n_gen), t, 0, n_gen, {}, "read_gbps"};
                r.weight_bytes = traffic.decode_bytes;
                r.cache_bytes = cache_bytes;
                measure(
                    r, reps, [] { return read_gbps(5); },
                    [&] {
                        auto cache = m.new_cache();
                        r.time_run(n_gen, [&] {
                            for (std::size_t k = 0; k < n_gen; ++k) (void)m.forward(TokenBatch({gen[k]}), cache, last);
                        });
                    },
                    [&](double gbps) { return gbps * 1e9 / (traffic.decode_bytes + cache_bytes); });
                json ? print_json(r, model_name, level, no_mmap) : print_row(r);
            }
        });
    }
    simd::unforce();
    return 0;
}

}  // namespace hylens::cli
