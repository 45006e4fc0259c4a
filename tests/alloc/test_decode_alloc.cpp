// A warm single-token decode step allocates nothing (docs/kernels.md, "Per-call buffers"):
// every golden model (the three families, dense and MoE, F32 and BF16 checkpoints) runs its
// prompt, two warm-up steps (the first one grows the KV cache), then steps whose heap
// allocations on any thread are counted: exactly one with the forward() that returns a fresh
// logits tensor (that tensor), none with the forward() that writes into the caller's tensor;
// none either for a warm step of two sequences at once.
// Counting: this executable replaces the malloc family (forwarding to glibc's __libc_* entry
// points), which also sees operator new; under ASan, which owns malloc, it installs the
// sanitizer's allocation hook instead, so the ASan build keeps checking every block.

#include <hylens/cache/parts.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/kernels/workspace.hpp>
#include <hylens/models/load.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
// Set: only this thread's allocations count (tests of the thread-local workspace; a thread the
// process starts at load, OpenBLAS's, allocates 3 blocks as it starts, which a test run in the
// first milliseconds saw in 1 of ~5 ASan runs).
std::atomic<bool> g_this_thread_only{false};
thread_local bool t_counted_thread = false;
inline void count_one() noexcept {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    if (g_this_thread_only.load(std::memory_order_relaxed) && !t_counted_thread) return;
    g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// ASan owns malloc; its allocator calls this hook for every block (malloc, operator new, ...).
// (declared here: Debian's g++ does not ship <sanitizer/allocator_interface.h>; the runtime has it)
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
extern "C" void __sanitizer_print_stack_trace();
// HYLENS_ALLOC_TRACE=1 prints the stack of every counted allocation (to find an unexpected one).
const bool g_trace = std::getenv("HYLENS_ALLOC_TRACE") != nullptr;
void on_malloc(const volatile void*, std::size_t) {
    if (g_trace && g_counting.load(std::memory_order_relaxed)) __sanitizer_print_stack_trace();
    count_one();
}
void on_free(const volatile void*) {}
const int g_hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// glibc: this executable's malloc family counts and forwards to glibc's own entry points; the
// global operator new of libstdc++ calls malloc, so it is counted too (as are C libraries' blocks,
// e.g. xtensor's aligned storage and OpenBLAS's buffers).
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

void* malloc(std::size_t n) {
    count_one();
    return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
    count_one();
    return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
    count_one();
    return __libc_realloc(p, n);
}
void* memalign(std::size_t a, std::size_t n) {
    count_one();
    return __libc_memalign(a, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) {
    count_one();
    return __libc_memalign(a, n);
}
int posix_memalign(void** out, std::size_t a, std::size_t n) {
    count_one();
    void* p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void free(void* p) { __libc_free(p); }
}
#endif

namespace fs = std::filesystem;
using namespace hylens;

namespace {

/// Heap allocations (on any thread) while f runs.
template <class F>
long allocations_during(F&& f) {
    g_allocations.store(0);
    g_counting.store(true);
    f();
    g_counting.store(false);
    return g_allocations.load();
}

/// Heap allocations of the calling thread while f runs.
template <class F>
long allocations_on_this_thread_during(F&& f) {
    t_counted_thread = true;
    g_this_thread_only.store(true);
    const long n = allocations_during(f);
    g_this_thread_only.store(false);
    t_counted_thread = false;
    return n;
}

/// Every golden model's checkpoints: its F32 one and, where it has one, its BF16 one.
struct Checkpoint {
    fs::path golden, weights;
    std::string label;
};
std::vector<Checkpoint> golden_checkpoints() {
    std::vector<Checkpoint> out;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models")) {
        const fs::path d = e.path();
        if (!fs::exists(d / "golden.safetensors")) continue;
        out.push_back({d, d, d.filename().string()});
        if (fs::exists(d / "model-bf16" / "model.safetensors"))
            out.push_back({d, d / "model-bf16", d.filename().string() + " (BF16)"});
    }
    std::sort(out.begin(), out.end(), [](const Checkpoint& a, const Checkpoint& b) { return a.label < b.label; });
    return out;
}

/// Returns once every pool thread has started and taken part in a parallel region (false after
/// 30 tries). A thread's start allocates (under ASan, its stack bookkeeping), and on a loaded
/// machine a worker created by the first forward may start only during a later, counted step.
/// Each try is a region whose parts wait for one another, so every thread must hold one; a try
/// can time out when a worker starts after the region was published (it then waits for the next).
bool pool_threads_started() {
    ThreadPool& pool = ThreadPool::instance();
    const std::size_t n = pool.size();
    for (int attempt = 0; attempt < 30; ++attempt) {
        std::atomic<std::size_t> arrived{0};
        std::atomic<bool> all{true};
        pool.parallel_for(n, [&](std::size_t, std::size_t) {
            arrived.fetch_add(1);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            while (arrived.load() < n)
                if (std::chrono::steady_clock::now() > deadline) {
                    all.store(false);
                    return;
                }
        });
        if (all.load()) return true;
    }
    return false;
}

/// True when every KV part of the cache can take one more position without growing.
template <class Cache>
bool kv_has_room(const Cache& cache) {
    bool room = true;
    for (std::size_t i = 0; i < cache.num_layers(); ++i)
        cache.visit(i, [&](const auto& c) {
            for_each_kv_part(c, [&](const KVCache& kv) { room = room && kv.length() < kv.capacity(); });
        });
    return room;
}

void check_decode_allocations(const fs::path& golden_dir, const fs::path& weights_dir, const std::string& label) {
    INFO(label);
    const io::SafetensorsFile golden = io::SafetensorsFile::open(golden_dir / "golden.safetensors");
    // 24 prompt tokens, so the steps below attend over fewer than 32 keys: OpenBLAS 0.3.21's
    // AVX-512 small-matrix sgemm (P V, column-major M = head_dim) mallocs a packing buffer when
    // head_dim % 16 is 1..8 and K >= 32, i.e. for falcon_h1's head dim 24 here; the released
    // models' head dims (64, 128, 256) never take that path (docs/performance.md).
    std::vector<std::int64_t> prompt = golden.read_i64("input_ids");
    REQUIRE(prompt.size() >= 24);
    prompt.resize(24);
    const std::vector<std::int64_t> decode = golden.read_i64("decode.input_ids");
    REQUIRE(decode.size() >= 4);
    const AnyModel model = load(weights_dir);
    model.visit([&](const auto& m) {
        auto cache = m.prefill(TokenBatch(prompt));
        TokenBatch step{decode[0]};
        Tensor3 logits;
        for (std::size_t i = 0; i < 2; ++i) {  // warm-up: the first step grows the KV cache
            step.ids[0] = decode[i];
            m.forward(step, cache, logits);
        }
        step.ids[0] = decode[2];
        REQUIRE(kv_has_room(cache));
        auto twin = cache;  // the same step through the other overload, for the bitwise check
        Tensor3 returned;
        const long fresh = allocations_during([&] { returned = m.forward(step, cache); });
        CHECK_MESSAGE(fresh == 1, label << ": a decode step returning its logits made " << fresh
                                        << " allocations (expected 1: the logits tensor)");
        const long into = allocations_during([&] { m.forward(step, twin, logits); });
        CHECK_MESSAGE(into == 0, label << ": a decode step into a reused logits tensor made " << into
                                       << " allocations (expected 0)");
        REQUIRE(logits.shape() == returned.shape());
        CHECK(std::equal(logits.begin(), logits.end(), returned.begin()));
        CHECK(cache == twin);
        // And again one position later, through the reused tensor, after a pause longer than the
        // pool's 100 ms between load checks, so the automatic polling reads /proc/loadavg inside
        // the step (core/thread_pool.hpp): that read must not allocate either.
        step.ids[0] = decode[3];
        REQUIRE(kv_has_room(twin));
        ThreadPool::instance().set_spin_auto();
        std::this_thread::sleep_for(std::chrono::milliseconds(120));
        const long next = allocations_during([&] { m.forward(step, twin, logits); });
        CHECK_MESSAGE(next == 0, label << ": the next decode step made " << next << " allocations (expected 0)");
        CHECK(Workspace::local().depth() == 0);

        // Two sequences at once: the same buffers, twice as long.
        std::vector<std::int64_t> other(prompt.rbegin(), prompt.rend());
        auto pair = m.prefill(TokenBatch(std::vector<std::vector<std::int64_t>>{prompt, other}));
        TokenBatch steps2(std::vector<std::vector<std::int64_t>>{{decode[0]}, {decode[1]}});
        for (std::size_t i = 0; i < 3; ++i) {
            if (i == 2) REQUIRE(kv_has_room(pair));
            const long n = allocations_during([&] { m.forward(steps2, pair, logits); });
            if (i == 2) CHECK_MESSAGE(n == 0, label << ": a warm two-sequence step made " << n << " allocations");
            std::swap(steps2.ids[0], steps2.ids[1]);
        }
    });
}

}  // namespace

TEST_CASE("decode allocations: a warm single-token step allocates only the returned logits") {
    const std::vector<Checkpoint> all = golden_checkpoints();
    REQUIRE(all.size() >= 3);
    REQUIRE(pool_threads_started());
    for (const Checkpoint& c : all)
        SUBCASE(c.label.c_str()) { check_decode_allocations(c.golden, c.weights, c.label); }
}

TEST_CASE("decode allocations: the counting hook sees allocations") {
    // The invariant above is only as good as the counter: a vector of 3 floats is one allocation.
    std::size_t size = 0;
    const long n = allocations_on_this_thread_during([&] {
        std::vector<float> v(3);
        size = v.size();
    });
    CHECK(size == 3);
    CHECK(n == 1);
}

TEST_CASE("decode allocations: workspace frames nest and reuse their slots") {
    Workspace& ws = Workspace::local();
    const std::size_t base = ws.depth();
    float* first = nullptr;
    {
        Workspace::Frame outer;
        std::span<float> a = outer.zeros<float>(100);
        first = a.data();
        CHECK(std::all_of(a.begin(), a.end(), [](float x) { return x == 0.0f; }));
        std::fill(a.begin(), a.end(), 1.0f);
        {
            Workspace::Frame inner;
            std::span<float> b = inner.zeros<float>(50);
            CHECK(b.data() != a.data());
            CHECK(ws.depth() == base + 2);
        }
        CHECK(ws.depth() == base + 1);
        CHECK(a[99] == 1.0f);  // the inner frame left the outer buffer alone
    }
    CHECK(ws.depth() == base);
    float* reused = nullptr;
    float value = 1.0f;
    const long again = allocations_on_this_thread_during([&] {  // the workspace is this thread's
        Workspace::Frame f;
        std::span<float> a = f.zeros<float>(64);  // fits the slot's 512 bytes: reused, zeroed
        reused = a.data();
        value = a[0];
    });
    CHECK(again == 0);
    CHECK(reused == first);
    CHECK(value == 0.0f);
    const std::size_t held = ws.bytes_held();
    {
        Workspace::Frame f;
        std::span<float> big = f.uninitialized<float>(Workspace::kKeepBytes / sizeof(float) + 1);
        CHECK(big.size() > 0);
    }
    if (base == 0)  // a buffer above kKeepBytes is freed when the outermost frame closes
        CHECK(ws.bytes_held() <= held);
}

TEST_CASE("decode allocations: a large buffer lives on for the next sibling frame, then is freed") {
    // A prefill's layers each take their largest buffers (above kKeepBytes) in a frame of their
    // own inside the forward's: the next layer takes the same slot again, without allocating.
    Workspace& ws = Workspace::local();
    REQUIRE(ws.depth() == 0);
    REQUIRE(ws.bytes_held() < Workspace::kKeepBytes);  // nothing large held between forwards
    const std::size_t big = Workspace::kKeepBytes / sizeof(float) + 1;
    float* first = nullptr;
    float* second = nullptr;
    float last = 1.0f;
    long again = -1;
    {
        Workspace::Frame forward;
        (void)forward.zeros<float>(16);
        {
            Workspace::Frame layer;
            std::span<float> a = layer.uninitialized<float>(big);
            first = a.data();
            a[big - 1] = 1.0f;
        }
        CHECK(ws.bytes_held() > Workspace::kKeepBytes);  // kept while `forward` is open
        again = allocations_on_this_thread_during([&] {  // the workspace is this thread's
            Workspace::Frame layer;
            std::span<float> b = layer.zeros<float>(big);
            second = b.data();
            last = b[big - 1];
        });
    }
    CHECK(again == 0);
    CHECK(second == first);
    CHECK(last == 0.0f);  // zeros() still zeroes a reused slot
    CHECK(ws.bytes_held() < Workspace::kKeepBytes);  // freed when the outermost frame closed
}
