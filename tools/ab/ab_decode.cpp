// Interleaved decode (or prefill) A/B of builds of the hylens headers (tools/ab/README.md): each
// BUILD is a shared object made from tools/ab/decode_build.cpp at some revision; all are loaded
// into this one process, each round decodes (prefills) once with every build in rotated order,
// and the per-round ratios to the first build are reported. Interleaving in one process takes
// the machine's drift (a shared VM's memory bandwidth moves by 2x over minutes) out of the
// comparison, which runs of separate processes alternating do not.
//
//   hylens_ab --model DIR [-t THREADS] [-r ROUNDS] [-n TOKENS | -p TOKENS] [--mapped] [--json] BUILD.so BUILD.so ...

#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using OpenFn = void* (*)(const char*, int, int, char*, std::size_t);
// hylens_ab_decode and hylens_ab_prefill alike
using RunFn = int (*)(void*, int, double*, std::uint64_t*, char*, std::size_t);
using CloseFn = void (*)(void*);

struct Build {
    std::string path;    // as given
    std::string loaded;  // the file dlopen'ed (a private copy when a path repeats)
    void* so = nullptr;
    void* handle = nullptr;
    RunFn run = nullptr;  // decode or prefill
    CloseFn close = nullptr;
    std::vector<double> tokens_per_s;
    std::vector<std::uint64_t> hashes;
};

template <class F>
F symbol(void* so, const char* name, const std::string& path) {
    void* p = dlsym(so, name);
    if (!p)
        throw std::runtime_error(path + ": no symbol " + name +
                                 " (not a build of tools/ab/decode_build.cpp, or one older than that entry point)");
    return reinterpret_cast<F>(p);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
    std::string model;
    int threads = 1, rounds = 9, tokens = 64, prompt = 0;
    bool mapped = false, json = false;
    std::vector<std::string> paths;
    CLI::App app{"Decodes (or prefills, -p) with every BUILD (a shared object of tools/ab/decode_build.cpp) in "
                 "interleaved rounds in one process and reports each build's median tokens/s and its ratio to the first "
                 "build's.",
                 "hylens_ab"};
    app.add_option("--model", model, "model folder (config.json + *.safetensors)")->required();
    app.add_option("-t,--threads", threads, "pool threads of every build (default 1)")->check(CLI::Range(1, 1024));
    app.add_option("-r,--rounds", rounds, "rounds; each runs once with every build (default 9)")->check(CLI::Range(1, 10000));
    auto* gen = app.add_option("-n,--n-gen", tokens, "tokens decoded a run, one at a time on a fresh cache (default 64)")
                    ->check(CLI::Range(1, 4096));
    app.add_option("-p,--n-prompt", prompt,
                   "prefill instead: a run is one forward of this many tokens on a fresh cache, the last position's "
                   "logits only (as hylens bench's pp test)")
        ->check(CLI::Range(1, 4096))
        ->excludes(gen);
    app.add_flag("--mapped", mapped, "map the checkpoint (default: weights read into memory, as hylens bench --no-mmap)");
    app.add_flag("--json", json, "one JSON object per build instead of the table");
    app.add_option("builds", paths, "two or more builds (.so)")->required()->expected(2, 1 << 20)->check(CLI::ExistingFile);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }

    std::vector<Build> builds(paths.size());
    const std::filesystem::path tmp = std::filesystem::temp_directory_path() / ("hylens_ab." + std::to_string(::getpid()));
    int rc = 0;
    try {
        for (std::size_t b = 0; b < builds.size(); ++b) {
            Build& B = builds[b];
            B.path = B.loaded = paths[b];
            // dlopen of a file already loaded returns the same object (one pool, one copy of
            // everything): a repeated build gets a private copy.
            if (std::count(paths.begin(), paths.begin() + static_cast<std::ptrdiff_t>(b), paths[b]) > 0) {
                std::filesystem::create_directories(tmp);
                B.loaded = (tmp / (std::to_string(b) + ".so")).string();
                std::filesystem::copy_file(paths[b], B.loaded, std::filesystem::copy_options::overwrite_existing);
            }
            B.so = dlopen(std::filesystem::absolute(B.loaded).c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!B.so) throw std::runtime_error(std::string("dlopen: ") + dlerror());
            const auto open = symbol<OpenFn>(B.so, "hylens_ab_open", B.path);
            // Only the entry point this run calls: builds made before hylens_ab_prefill still decode.
            B.run = symbol<RunFn>(B.so, prompt > 0 ? "hylens_ab_prefill" : "hylens_ab_decode", B.path);
            B.close = symbol<CloseFn>(B.so, "hylens_ab_close", B.path);
            char err[512] = "";
            B.handle = open(model.c_str(), threads, mapped ? 1 : 0, err, sizeof err);
            if (!B.handle) throw std::runtime_error(B.path + ": " + err);
        }
        const std::size_t V = builds.size();
        for (int q = 0; q < rounds; ++q)
            for (std::size_t v0 = 0; v0 < V; ++v0) {
                Build& B = builds[(v0 + static_cast<std::size_t>(q)) % V];  // each build first in turn
                double ts = 0;
                std::uint64_t h = 0;
                char err[512] = "";
                if (B.run(B.handle, prompt > 0 ? prompt : tokens, &ts, &h, err, sizeof err) != 0) throw std::runtime_error(B.path + ": " + err);
                B.tokens_per_s.push_back(ts);
                B.hashes.push_back(h);
            }
        if (!json)
            std::printf("%-40s %10s %10s %16s  %s\n", "build", "med t/s", "ratio", "ratio range", "logits");
        for (const Build& B : builds) {
            std::vector<double> ratio(static_cast<std::size_t>(rounds));
            for (std::size_t q = 0; q < ratio.size(); ++q) ratio[q] = B.tokens_per_s[q] / builds[0].tokens_per_s[q];
            const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
            // The logits of the last step (the prompt's last position), bitwise: the same in every round and as the first build's?
            const bool steady = std::all_of(B.hashes.begin(), B.hashes.end(), [&](std::uint64_t h) { return h == B.hashes[0]; });
            const bool same = steady && B.hashes[0] == builds[0].hashes[0];
            const char* logits = same ? "same bits" : steady ? "differ" : "vary between runs";
            if (json) {
                nlohmann::json j;
                j["build"] = B.path;
                j["model"] = model;
                j["threads"] = threads;
                j["test"] = (prompt > 0 ? "pp" : "tg") + std::to_string(prompt > 0 ? prompt : tokens);
                j["n_prompt"] = prompt;
                j["n_gen"] = prompt > 0 ? 0 : tokens;
                j["rounds"] = rounds;
                j["samples_ts"] = B.tokens_per_s;
                j["median_ts"] = median(B.tokens_per_s);
                j["ratio_median"] = median(ratio);
                j["ratio_min"] = *lo;
                j["ratio_max"] = *hi;
                j["logits"] = logits;
                std::cout << j.dump() << "\n";
            } else {
                std::printf("%-40s %10.2f %10.3f %7.3f - %6.3f  %s\n", B.path.c_str(), median(B.tokens_per_s), median(ratio), *lo,
                            *hi, logits);
            }
        }
    } catch (const std::exception& e) {
        std::cerr << "hylens_ab: " << e.what() << "\n";
        rc = 1;
    }
    for (Build& B : builds)
        if (B.handle) B.close(B.handle);
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    return rc;
}
