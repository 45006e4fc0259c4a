#pragma once
// The arithmetic of products with bf16 weights (docs/performance.md, "bf16 activations").
//
// By default hylens keeps every activation in float32: a projection with a bf16 weight widens
// the weight and multiplies float32 by float32, so a bf16 checkpoint gives the logits of its
// weights exactly as torch does in float32 (to float32 rounding).
//
// Opt-in, `round_activations`: the input of every projection with a bf16 weight
// (kernels::linear, kernels::linear_group) is first rounded to bf16, then the products of two
// bf16 values (exact in float32) are summed in float32: the arithmetic of llama.cpp's BF16
// weights on a CPU with AVX512_BF16. On a CPU with AVX512_BF16 (simd level avx512bf16) this
// runs on the bf16 dot-product instruction, twice the multiply rate of float32 FMA and half the
// activation bytes; elsewhere the same rounded values go through the float32 kernels, so the
// results agree across levels to float32 rounding of the sums. What it costs: each activation
// keeps 8 of its 24 significand bits (a relative error up to 2^-9 per input value); what that
// does to logits is measured in docs/performance.md. Float32 weights, the recurrences,
// attention, the norms and kernels::linear_row (single unembedding rows, routers) are not
// affected.
//
// Set by the environment variable HYLENS_BF16_ACTIVATIONS=1 (read at first use),
// precision::set_round_activations(bool) at any time (every thread), or the scope guard
// RoundActivations (its thread). A call holds the setting it started with (HoldRoundActivations:
// CausalLM::forward, generate, every study), so a set_round_activations from another thread
// while it runs changes its next call, not half of this one: a forward's projections read the
// setting one by one, and a study run in a Python thread while the main thread turned it on and
// off wrote records of both arithmetics under one run.json value.
// Rounding follows VCVTNEPS2BF16: to nearest, ties to even; a float32 denormal becomes a zero of
// its sign; NaN stays a quiet NaN (precision::round_activation, the scalar definition).

#include <atomic>   // std::atomic
#include <bit>      // std::bit_cast
#include <cstdint>  // std::uint32_t
#include <cstdlib>  // std::getenv
#include <string>   // std::string

#include "bf16.hpp"
#include "error.hpp"

namespace hylens::precision {

namespace detail {
/// This thread's held setting (-1: none; 0 or 1 while a call or a RoundActivations holds one).
inline int& held() {
    thread_local int h = -1;
    return h;
}
inline std::atomic<int>& forced() {
    static std::atomic<int> f{-1};
    return f;
}
inline bool from_env() {
    static const bool on = [] {
        const char* e = std::getenv("HYLENS_BF16_ACTIVATIONS");
        if (!e || !*e) return false;
        const std::string v = e;
        check<UnsupportedError>(v == "0" || v == "1", "[precision] HYLENS_BF16_ACTIVATIONS must be 0 or 1, got '", v,
                                "'");
        return v == "1";
    }();
    return on;
}
}  // namespace detail

/// Whether products with bf16 weights round their activations to bf16 now, on this thread: the
/// setting its call holds, else the process's.
inline bool round_activations() {
    if (const int h = detail::held(); h >= 0) return h == 1;
    const int f = detail::forced().load(std::memory_order_relaxed);
    return f >= 0 ? f == 1 : detail::from_env();
}

/// Turns the rounding of activations on or off for every later call (any thread; a call running
/// keeps the setting it started with).
inline void set_round_activations(bool on) noexcept {
    detail::forced().store(on ? 1 : 0, std::memory_order_relaxed);
}

/// Back to the environment's choice (HYLENS_BF16_ACTIVATIONS, off when unset).
inline void unset_round_activations() noexcept { detail::forced().store(-1, std::memory_order_relaxed); }

/// Scope guard: the rounding on or off for this thread's calls during its lifetime (it set the
/// process's setting and restored it, so guards on two threads undid each other).
class RoundActivations {
public:
    explicit RoundActivations(bool on = true) : prev_(detail::held()) { detail::held() = on ? 1 : 0; }
    ~RoundActivations() { detail::held() = prev_; }
    RoundActivations(const RoundActivations&) = delete;
    RoundActivations& operator=(const RoundActivations&) = delete;

private:
    int prev_;
};

/// Scope guard: this thread keeps the setting of now (round_activations()) for the guard's
/// lifetime, whatever set_round_activations does meanwhile. A forward, a generation and a study
/// hold one, so each runs in one arithmetic; nested, the inner one holds what the outer held.
class HoldRoundActivations : public RoundActivations {
public:
    HoldRoundActivations() : RoundActivations(round_activations()) {}
};

/// x rounded to bf16 as the activations are: to nearest even, denormals to a signed zero.
inline bf16 round_activation(float x) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if ((u & 0x7f800000u) == 0) return bf16{static_cast<std::uint16_t>((u >> 16) & 0x8000u)};
    return to_bf16(x);
}

}  // namespace hylens::precision
