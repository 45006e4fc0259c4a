// One build of the hylens headers as a shared object, for tools/ab/ab_decode.cpp: load a model,
// decode tokens (or prefill a prompt) on a fresh cache, time it. Compiled with hidden visibility and loaded with
// RTLD_LOCAL, each build keeps its own copy of every inline function and static (the thread
// pool included), so builds of different revisions run side by side in one process.
// A C interface, so that the driver needs none of the headers and builds of older revisions
// load alike (docs: tools/ab/README.md).

#include <hylens/models/load.hpp>
#include <hylens/stack/sampling.hpp>  // SplitMix64

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Build {
    std::unique_ptr<hylens::AnyModel> model;
    std::vector<std::int64_t> tokens;  // the decode's inputs, the same for every build
};

void set_error(char* err, std::size_t len, const char* what) {
    if (err && len > 0) {
        std::strncpy(err, what, len - 1);
        err[len - 1] = '\0';
    }
}

// FNV-1a over the bytes of the floats: equal hashes for bitwise equal logits.
std::uint64_t hash_floats(const float* p, std::size_t n) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

}  // namespace

#define HYLENS_AB_EXPORT extern "C" __attribute__((visibility("default")))

/// Loads the model folder `dir` (weights in memory unless `mapped`) with `threads` pool threads
/// and runs one warm-up step; nullptr and a message in err on failure.
HYLENS_AB_EXPORT void* hylens_ab_open(const char* dir, int threads, int mapped, char* err, std::size_t err_len) {
    try {
        hylens::ThreadPool::instance().resize(static_cast<std::size_t>(threads));
        auto b = std::make_unique<Build>();
        b->model = std::make_unique<hylens::AnyModel>(hylens::load(
            dir, hylens::LoadOptions{mapped ? hylens::io::Storage::mapped : hylens::io::Storage::in_memory}));
        const std::uint64_t vocab = b->model->config().vocab;
        hylens::SplitMix64 rng(0x9E3779B97F4A7C15ull);  // token ids below vocab, the same for every build
        b->tokens.resize(4096);
        for (auto& t : b->tokens) t = static_cast<std::int64_t>(rng.next() % vocab);
        b->model->visit([&](const auto& m) {
            auto cache = m.new_cache();
            (void)m.forward(hylens::TokenBatch({b->tokens[0]}), cache);
        });
        return b.release();
    } catch (const std::exception& e) {
        set_error(err, err_len, e.what());
        return nullptr;
    }
}

namespace {
// The tokens/s of n tokens (1 to 4096) through `run(model, tokens, n, cache, logits, last)` on a
// fresh cache, the last position's logits only, and a hash of those logits; 0 on success, else
// -1 and a message in err.
template <class Run>
int timed(const char* name, void* handle, int n, double* tokens_per_s, std::uint64_t* logits_hash, char* err,
          std::size_t err_len, Run run) {
    try {
        auto* b = static_cast<Build*>(handle);
        if (n < 1 || static_cast<std::size_t>(n) > b->tokens.size()) {
            set_error(err, err_len, (std::string(name) + ": n must be 1 to 4096").c_str());
            return -1;
        }
        b->model->visit([&](const auto& m) {
            auto cache = m.new_cache();
            hylens::ForwardOptions last;
            last.last_only = true;
            hylens::Tensor3 logits;
            const auto t0 = std::chrono::steady_clock::now();
            run(m, b->tokens, static_cast<std::size_t>(n), cache, logits, last);
            *tokens_per_s = n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            *logits_hash = hash_floats(logits.data(), logits.size());
        });
        return 0;
    } catch (const std::exception& e) {
        set_error(err, err_len, e.what());
        return -1;
    }
}
}  // namespace

/// Decodes n tokens (at most 4096) one at a time on a fresh cache; the tokens/s of the n steps
/// and a hash of the last step's logits. 0 on success, else -1 and a message in err.
HYLENS_AB_EXPORT int hylens_ab_decode(void* handle, int n, double* tokens_per_s, std::uint64_t* logits_hash, char* err,
                                      std::size_t err_len) {
    return timed("hylens_ab_decode", handle, n, tokens_per_s, logits_hash, err, err_len,
                 [](const auto& m, const auto& tokens, std::size_t count, auto& cache, auto& logits, const auto& last) {
                     for (std::size_t k = 0; k < count; ++k)
                         m.forward(hylens::TokenBatch({tokens[k]}), cache, logits, last);
                 });
}

/// Prefills n tokens (at most 4096) in one forward on a fresh cache, the logits of the last
/// position only (as `hylens bench`'s pp test); the tokens/s and a hash of those logits (the
/// token batch is built inside the timed part: a copy of n ids). 0 on success, else -1 and a
/// message in err.
HYLENS_AB_EXPORT int hylens_ab_prefill(void* handle, int n, double* tokens_per_s, std::uint64_t* logits_hash, char* err,
                                       std::size_t err_len) {
    return timed("hylens_ab_prefill", handle, n, tokens_per_s, logits_hash, err, err_len,
                 [](const auto& m, const auto& tokens, std::size_t count, auto& cache, auto& logits, const auto& last) {
                     const std::vector<std::int64_t> prompt(tokens.begin(), tokens.begin() + count);
                     m.forward(hylens::TokenBatch(prompt), cache, logits, last);
                 });
}

HYLENS_AB_EXPORT void hylens_ab_close(void* handle) { delete static_cast<Build*>(handle); }
