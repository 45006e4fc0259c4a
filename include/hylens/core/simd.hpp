#pragma once
// Run-time choice of the instruction set for the hot kernels (docs/performance.md, "Instruction sets: run-time dispatch").
//
// hylens is header-only, so the includer's compiler flags decide what a plain function may use:
// without -march, only x86-64's SSE2 (or aarch64's NEON). The kernels in kernels/isa/ are
// therefore compiled once per level with GCC/Clang function attributes
// (`__attribute__((target("avx2,fma")))`, `target("avx512f,...")`), whatever the includer's
// flags, and the level is chosen once at run time from what the CPU (and the OS) supports.
// Why not xsimd: xsimd 8.1 (Debian 12) defines its AVX2 / AVX-512 batch types only when the
// matching compiler macro (__AVX2__, __AVX512F__) is set, so it cannot compile an AVX-512
// function in a translation unit built without -mavx512f.
//
// Levels:
//   baseline  SSE2 on x86-64, NEON on aarch64 (GCC vector extensions), plain C++ elsewhere
//   avx2      AVX2 + FMA (x86-64-v3)
//   avx512    AVX-512 F/BW/VL/DQ (x86-64-v4)
//   avx512bf16  avx512 plus AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4): the same kernels
//             as avx512, and the bf16 dot-product instructions for products whose activations
//             are rounded to bf16 (core/precision.hpp); every kernel without such a product
//             runs its avx512 code
// Forcing (tests, benchmarks): the environment variable HYLENS_SIMD=baseline|avx2|avx512|avx512bf16|native
// read at first use, or simd::force(level) / simd::unforce() at any time. Forcing a level the
// CPU does not have is an UnsupportedError.

#include <atomic>   // std::atomic
#include <cstdlib>  // std::getenv
#include <string>   // std::string
#include <vector>   // std::vector

#include "error.hpp"

// HYLENS_NO_X86_LEVELS compiles the x86 levels out on x86-64 too: the baseline level only, the
// code an aarch64 build compiles (the test suite's headers.portable check compiles the library
// so, warnings as errors). A compile definition of every translation unit of a program, never
// of some: the inline kernels differ with it.
#if !defined(HYLENS_NO_X86_LEVELS) && (defined(__x86_64__) || defined(_M_X64)) && \
    (defined(__GNUC__) || defined(__clang__))
#define HYLENS_SIMD_X86 1
#define HYLENS_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define HYLENS_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define HYLENS_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))
#else
#define HYLENS_SIMD_X86 0
#endif
/// On a helper that takes a block of registers by pointer (the GEMMs' 8 x 8 and 16 x 16
/// transposes): g++ 12 left transpose8 out of line in a portable build (no -march), so the block
/// went through memory around each of its calls (docs/performance-log.md, "Short prompts at the avx512 levels").
#if defined(__GNUC__) || defined(__clang__)
#define HYLENS_ALWAYS_INLINE __attribute__((always_inline))
#else
#define HYLENS_ALWAYS_INLINE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define HYLENS_SIMD_VECTOR_EXT 1  // GCC/Clang vector extensions for the baseline level
#else
#define HYLENS_SIMD_VECTOR_EXT 0
#endif

namespace hylens::simd {

enum class Level : int { baseline = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };

inline const char* level_name(Level l) noexcept {
    switch (l) {
        case Level::avx2: return "avx2";
        case Level::avx512: return "avx512";
        case Level::avx512bf16: return "avx512bf16";
        default: return "baseline";
    }
}

/// The best level this CPU and OS support (GCC's __builtin_cpu_supports also checks that the
/// OS saves the wide registers).
inline Level detected() noexcept {
    static const Level best = [] {
#if HYLENS_SIMD_X86
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
            return __builtin_cpu_supports("avx512bf16") ? Level::avx512bf16 : Level::avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Level::avx2;
#endif
        return Level::baseline;
    }();
    return best;
}

/// Every level this machine can run, lowest first (what the tests force in turn).
inline std::vector<Level> supported_levels() {
    std::vector<Level> v;
    for (int l = 0; l <= static_cast<int>(detected()); ++l) v.push_back(static_cast<Level>(l));
    return v;
}

/// Parses a level name ("baseline", "avx2", "avx512", "avx512bf16"; "native" = detected()).
inline Level parse_level(const std::string& s) {
    if (s == "native") return detected();
    if (s == "baseline") return Level::baseline;
    if (s == "avx2") return Level::avx2;
    if (s == "avx512") return Level::avx512;
    if (s == "avx512bf16") return Level::avx512bf16;
    fail<UnsupportedError>("[simd] unknown instruction-set level '", s,
                           "' (expected baseline, avx2, avx512, avx512bf16 or native)");
}

namespace detail {
inline std::atomic<int>& forced() {
    static std::atomic<int> f{-1};
    return f;
}
inline void require_supported(Level l, const char* where) {
    check<UnsupportedError>(static_cast<int>(l) <= static_cast<int>(detected()), "[simd] ", where, " asks for ",
                            level_name(l), " but this CPU supports at most ", level_name(detected()));
}
inline Level from_env() {
    static const Level l = [] {
        const char* e = std::getenv("HYLENS_SIMD");
        if (!e || !*e) return detected();
        const Level want = parse_level(e);
        require_supported(want, "HYLENS_SIMD");
        return want;
    }();
    return l;
}
}  // namespace detail

/// Forces every dispatched kernel to `l` (UnsupportedError if the CPU lacks it).
inline void force(Level l) {
    detail::require_supported(l, "simd::force");
    detail::forced().store(static_cast<int>(l), std::memory_order_relaxed);
}

/// Back to the environment's choice (HYLENS_SIMD) or the detected level.
inline void unforce() noexcept { detail::forced().store(-1, std::memory_order_relaxed); }

/// The level of the float32 kernels for a level: avx512bf16 runs the avx512 code everywhere but
/// in the products of bf16-rounded activations (the switch of every kernel without such a
/// product is over this).
/// Whether level l is `min` or above it (the levels are ordered: baseline < avx2 < avx512 <
/// avx512bf16).
inline constexpr bool at_least(Level l, Level min) noexcept { return static_cast<int>(l) >= static_cast<int>(min); }

inline constexpr Level f32_level(Level l) noexcept { return l == Level::avx512bf16 ? Level::avx512 : l; }

/// The level the kernels run at now. Throws UnsupportedError for a bad HYLENS_SIMD.
inline Level active() {
    const int f = detail::forced().load(std::memory_order_relaxed);
    return f >= 0 ? static_cast<Level>(f) : detail::from_env();
}

/// Scope guard: forces a level for its lifetime (tests and benchmarks).
class ForceLevel {
public:
    explicit ForceLevel(Level l) : prev_(detail::forced().load()) { force(l); }
    ~ForceLevel() { detail::forced().store(prev_); }
    ForceLevel(const ForceLevel&) = delete;
    ForceLevel& operator=(const ForceLevel&) = delete;

private:
    int prev_;
};

}  // namespace hylens::simd
