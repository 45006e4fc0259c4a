// Loading a ~1 GB bf16 checkpoint: memory-mapped SafetensorsFile against a plain read().
//
// The file (Qwen3.5-like tensor names; hidden 1024, 16 layers, vocab 151936, all BF16) is
// generated once in /tmp and reused; generation is never timed. Benchmarks:
//   plain_read         read() of the whole file into a preallocated, pre-faulted buffer
//   read_into_new_buffer  read() into a freshly allocated buffer (pays first-touch page faults)
//   read_then_sum      the same read, then the full widened sum over the buffer (compute cost)
//   mmap_touch_pages   SafetensorsFile::open + weight() for every tensor + one element per 4 KB page
//   mmap_full_sum      as above, plus the full widened sum of every element through the mapping
// Counters: GB/s of file bytes; ratio_to_read = time / time(plain_read) (measured in the
// same process just before); VmRSS, RssFile, RssAnon in MB and RssFile / file size after
// the touch (mapped pages count as RssFile, not as anonymous memory).
// Arg 0 = page cache warm (the file was just read); arg 1 = cold: the file's pages are
// dropped from the page cache (posix_fadvise DONTNEED, our file only) before each iteration.
// This 2-core machine is shared: run with --benchmark_repetitions and read medians.

#include <benchmark/benchmark.h>
#include <fcntl.h>   // ::open, ::posix_fadvise
#include <unistd.h>  // ::read, ::close

#include <hylens/io/safetensors.hpp>
#include <hylens/io/safetensors_writer.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using hylens::io::SafetensorsFile;

constexpr std::size_t kHidden = 1024, kLayers = 16, kVocab = 151936, kInter = 3584;

fs::path bench_file() {
    if (const char* p = std::getenv("HYLENS_BENCH_LOAD_FILE")) return p;
    return fs::temp_directory_path() / "hylens-bench-load-v1.safetensors";
}

struct TensorSpec {
    std::string name;
    std::vector<std::size_t> shape;
};

std::vector<TensorSpec> qwen_like_specs() {
    std::vector<TensorSpec> specs;
    const std::string p = "model.language_model.";
    specs.push_back({p + "embed_tokens.weight", {kVocab, kHidden}});
    for (std::size_t l = 0; l < kLayers; ++l) {
        const std::string L = p + "layers." + std::to_string(l) + ".";
        specs.push_back({L + "input_layernorm.weight", {kHidden}});
        if (l % 4 == 3) {  // full attention every 4th layer, as in Qwen3.5
            specs.push_back({L + "self_attn.q_proj.weight", {4096, kHidden}});
            specs.push_back({L + "self_attn.k_proj.weight", {512, kHidden}});
            specs.push_back({L + "self_attn.v_proj.weight", {512, kHidden}});
            specs.push_back({L + "self_attn.o_proj.weight", {kHidden, 2048}});
        } else {
            specs.push_back({L + "linear_attn.in_proj_qkv.weight", {6144, kHidden}});
            specs.push_back({L + "linear_attn.in_proj_z.weight", {2048, kHidden}});
            specs.push_back({L + "linear_attn.out_proj.weight", {kHidden, 2048}});
        }
        specs.push_back({L + "post_attention_layernorm.weight", {kHidden}});
        specs.push_back({L + "mlp.gate_proj.weight", {kInter, kHidden}});
        specs.push_back({L + "mlp.up_proj.weight", {kInter, kHidden}});
        specs.push_back({L + "mlp.down_proj.weight", {kHidden, kInter}});
    }
    specs.push_back({p + "norm.weight", {kHidden}});
    return specs;
}

/// Writes the file unless a valid one with the same tensors is already there.
const fs::path& ensure_file() {
    static const fs::path path = [] {
        const fs::path file = bench_file();
        const auto specs = qwen_like_specs();
        try {
            const auto f = SafetensorsFile::open(file);
            if (f.size() == specs.size() && f.contains(specs.back().name)) return file;
        } catch (const hylens::Error&) {  // absent or stale: regenerate
        }
        hylens::io::SafetensorsWriter w(hylens::io::SafetensorsWriter::Order::insertion);
        std::uint64_t state = 0x9e3779b97f4a7c15ull;
        for (const auto& s : specs) {
            std::size_t n = 1;
            for (auto d : s.shape) n *= d;
            std::vector<std::byte> bytes(2 * n);
            auto* out = reinterpret_cast<std::uint16_t*>(bytes.data());
            for (std::size_t i = 0; i < n; ++i) {
                // xorshift64: random sign and mantissa, exponent in [2^-8, 2^-1): plausible weights.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                const auto r = static_cast<std::uint32_t>(state);
                out[i] = static_cast<std::uint16_t>((r & 0x8000u) | ((119u + (r >> 16) % 7u) << 7) | (r & 0x7fu));
            }
            w.add(s.name, hylens::DType::BF16, s.shape, std::move(bytes));
        }
        w.write(file);
        return file;
    }();
    return path;
}

struct Rss {
    double vm_mb = 0, file_mb = 0, anon_mb = 0;
};

Rss read_rss() {
    Rss r;
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        double kb = 0;
        if (key == "VmRSS:" && in >> kb) r.vm_mb = kb / 1024.0;
        else if (key == "RssFile:" && in >> kb) r.file_mb = kb / 1024.0;
        else if (key == "RssAnon:" && in >> kb) r.anon_mb = kb / 1024.0;
        in.ignore(1 << 20, '\n');
    }
    return r;
}

void drop_from_page_cache(const fs::path& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

void read_all(const fs::path& file, std::vector<std::byte>& buf) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + file.string());
    std::size_t done = 0;
    while (done < buf.size()) {
        const ssize_t got = ::read(fd, buf.data() + done, buf.size() - done);
        if (got <= 0) break;
        done += static_cast<std::size_t>(got);
    }
    ::close(fd);
    if (done != buf.size()) throw std::runtime_error("short read of " + file.string());
}

/// Sum of n bf16 values widened to f32. 16 independent accumulators so the compiler can keep
/// one vector register of partial sums (a single float accumulator serialises on add latency).
float sum_bf16(const std::uint16_t* p, std::size_t n) {
    float acc[16] = {};
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (std::size_t j = 0; j < 16; ++j) acc[j] += std::bit_cast<float>(static_cast<std::uint32_t>(p[i + j]) << 16);
    float s = 0;
    for (; i < n; ++i) s += std::bit_cast<float>(static_cast<std::uint32_t>(p[i]) << 16);
    for (float a : acc) s += a;
    return s;
}

/// Median time of 3 plain reads (the denominator of ratio_to_read), in the cache state asked for.
double plain_read_seconds(const fs::path& file, std::vector<std::byte>& buf, bool cold) {
    std::vector<double> t;
    for (int i = 0; i < 3; ++i) {
        if (cold) drop_from_page_cache(file);
        const auto t0 = std::chrono::steady_clock::now();
        read_all(file, buf);
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[1];
}

/// A buffer of the file's size, faulted in and written once by a first read. On this VM the
/// first touch of fresh anonymous memory is very slow (measured: 8.4 s to memset 929 MB the
/// first time, 0.17 s the second; the first read() into it afterwards still took 3.2 s, the
/// next ones 0.13-0.2 s), so the timed reads start from a buffer that has been through both.
/// BM_read_into_new_buffer shows the first-touch cost a loader reading into fresh memory pays.
std::vector<std::byte> warmed_buffer(const fs::path& file) {
    std::vector<std::byte> buf(fs::file_size(file));
    std::memset(buf.data(), 1, buf.size());
    read_all(file, buf);
    return buf;
}

void set_common_counters(benchmark::State& state, std::size_t file_bytes, const Rss& rss) {
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * file_bytes));
    state.counters["file_MB"] = static_cast<double>(file_bytes) / (1024.0 * 1024.0);
    state.counters["VmRSS_MB"] = rss.vm_mb;
    state.counters["RssFile_MB"] = rss.file_mb;
    state.counters["RssAnon_MB"] = rss.anon_mb;
    state.counters["RssFile_over_file"] = rss.file_mb / (static_cast<double>(file_bytes) / (1024.0 * 1024.0));
}

/// Cold runs: drop the file's pages before the iteration, outside the timed region.
void drop_if_cold(benchmark::State& state, bool cold, const fs::path& file) {
    if (!cold) return;
    state.PauseTiming();
    drop_from_page_cache(file);
    state.ResumeTiming();
}

/// read() of the whole file into a warmed buffer (+ the full widened sum if full_sum).
void read_load(benchmark::State& state, bool full_sum) {
    const fs::path& file = ensure_file();
    const bool cold = state.range(0) != 0;
    const auto f = SafetensorsFile::open(file);  // for the tensor offsets only
    std::vector<std::byte> buf = warmed_buffer(file);
    for (auto _ : state) {
        drop_if_cold(state, cold, file);
        read_all(file, buf);
        float total = 0;
        if (full_sum)
            for (const auto& t : f.tensors())
                total += sum_bf16(reinterpret_cast<const std::uint16_t*>(buf.data() + f.data_start() + t.offset), t.nbytes / 2);
        benchmark::DoNotOptimize(total);
        benchmark::DoNotOptimize(buf.data());
    }
    set_common_counters(state, buf.size(), read_rss());
}

void BM_plain_read(benchmark::State& state) { read_load(state, false); }
void BM_read_then_sum(benchmark::State& state) { read_load(state, true); }

void BM_read_into_new_buffer(benchmark::State& state) {
    const fs::path& file = ensure_file();
    const std::size_t file_bytes = fs::file_size(file);
    for (auto _ : state) {
        std::vector<std::byte> buf(file_bytes);  // fresh pages every time (glibc mmaps blocks this large)
        read_all(file, buf);
        benchmark::DoNotOptimize(buf.data());
    }
    set_common_counters(state, file_bytes, read_rss());
}

/// open + weight() for every tensor + one element per 4 KB page (+ the full sum if full_sum).
void mmap_load(benchmark::State& state, bool full_sum) {
    const fs::path& file = ensure_file();
    const bool cold = state.range(0) != 0;
    const std::size_t file_bytes = fs::file_size(file);
    std::vector<std::byte> buf = warmed_buffer(file);
    const double read_s = plain_read_seconds(file, buf, cold);
    std::vector<std::byte>().swap(buf);  // free it (clear() would keep the pages) before reading RSS
    double total_s = 0;
    Rss rss;
    for (auto _ : state) {
        drop_if_cold(state, cold, file);
        const auto t0 = std::chrono::steady_clock::now();
        const auto f = SafetensorsFile::open(file);
        float total = 0;
        for (const auto& t : f.tensors()) {
            const hylens::Weight w = f.weight(t.name);  // BF16: a view into the mapping
            const auto* p = w.bf16_data();
            const std::size_t n = w.numel();
            for (std::size_t i = 0; i < n; i += 2048) total += hylens::to_f32(p[i]);  // 2048 x 2 B = one 4 KB page
            if (full_sum) total += sum_bf16(reinterpret_cast<const std::uint16_t*>(p), n);
        }
        benchmark::DoNotOptimize(total);
        total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.PauseTiming();
        rss = read_rss();  // while the file is still mapped and touched
        state.ResumeTiming();
    }
    set_common_counters(state, file_bytes, rss);
    state.counters["ratio_to_read"] = total_s / static_cast<double>(state.iterations()) / read_s;
    state.counters["plain_read_ms"] = read_s * 1e3;
}

void BM_mmap_touch_pages(benchmark::State& state) { mmap_load(state, false); }
void BM_mmap_full_sum(benchmark::State& state) { mmap_load(state, true); }

}  // namespace

BENCHMARK(BM_plain_read)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_read_into_new_buffer)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_read_then_sum)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_mmap_touch_pages)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_mmap_full_sum)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
