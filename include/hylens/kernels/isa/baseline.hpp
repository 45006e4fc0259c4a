#pragma once
// The baseline level of the dispatched kernels (core/simd.hpp): 4-float vectors written with
// GCC/Clang vector extensions, which compile to SSE2 on x86-64 and NEON on aarch64 without any
// -m flag; plain loops on other compilers. Same operations as kernels/isa/avx2.hpp and
// avx512.hpp: a dot product with two accumulators per row, and a four-row form that does
// exactly the same arithmetic per row (so a row's result never depends on which rows share
// its block, i.e. on how the rows were split over threads).

#include <bit>      // std::bit_cast
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint16_t, std::uint32_t
#include <cstring>  // std::memcpy

#include "../../core/bf16.hpp"
#include "../../core/simd.hpp"
#include "row_prefetch.hpp"

namespace hylens::kernels::isa::baseline {

#if HYLENS_SIMD_VECTOR_EXT
using f32x4 = float __attribute__((vector_size(16)));
using u32x4 = std::uint32_t __attribute__((vector_size(16)));
using u16x4 = std::uint16_t __attribute__((vector_size(8)));

inline f32x4 load(const float* p) noexcept {
    f32x4 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline f32x4 load(const bf16* p) noexcept {
    u16x4 h;
    std::memcpy(&h, p, sizeof h);
    return std::bit_cast<f32x4>(__builtin_convertvector(h, u32x4) << 16);
}
/// Eight values as two 4-float vectors. For bf16, interleaving zeros below each 16-bit value puts
/// it in the upper half of a 32-bit lane: two shuffles instead of a widening and a shift (which
/// SSE2, lacking a zero-extend instruction, compiles to several more).
inline void load8(const float* p, f32x4& lo, f32x4& hi) noexcept {
    lo = load(p);
    hi = load(p + 4);
}
inline void load8(const bf16* p, f32x4& lo, f32x4& hi) noexcept {
    if constexpr (std::endian::native == std::endian::little) {
        using u16x8 = std::uint16_t __attribute__((vector_size(16)));
        u16x8 h;
        std::memcpy(&h, p, sizeof h);
        const u16x8 z = {};
        lo = std::bit_cast<f32x4>(__builtin_shufflevector(z, h, 0, 8, 1, 9, 2, 10, 3, 11));
        hi = std::bit_cast<f32x4>(__builtin_shufflevector(z, h, 4, 12, 5, 13, 6, 14, 7, 15));
    } else {
        lo = load(p);
        hi = load(p + 4);
    }
}
inline float hsum(f32x4 a, f32x4 b) noexcept {
    const f32x4 s = a + b;
    return (s[0] + s[2]) + (s[1] + s[3]);
}
inline float widen1(float v) noexcept { return v; }
inline float widen1(bf16 v) noexcept { return to_f32(v); }

/// sum_i x[i] * w[i] (w float32 or bf16, widened in registers).
template <class T>
inline float dot(const float* x, const T* w, std::size_t n) noexcept {
    f32x4 a0 = {}, a1 = {};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        f32x4 w0, w1;
        load8(w + i, w0, w1);
        a0 += load(x + i) * w0;
        a1 += load(x + i + 4) * w1;
    }
    for (; i + 4 <= n; i += 4) a0 += load(x + i) * load(w + i);
    float tail = 0.0f;
    for (; i < n; ++i) tail += x[i] * widen1(w[i]);
    return hsum(a0, a1) + tail;
}

/// out[j] = dot(x, w + j * rs, n) for the four rows j < 4 (row stride rs), bit-identical to four
/// dot() calls.
template <class T>
inline void dot4(const float* x, const T* w, std::size_t n, std::size_t rs, float* out) noexcept {
    f32x4 a[4][2] = {};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const f32x4 x0 = load(x + i), x1 = load(x + i + 4);
        if (i % kValuesPerLine<T> == 0)  // one prefetch per cache line of each row (row_prefetch.hpp)
            for (std::size_t j = 0; j < 4; ++j) prefetch_row_ahead(w + j * rs + i);
        for (std::size_t j = 0; j < 4; ++j) {
            f32x4 w0, w1;
            load8(w + j * rs + i, w0, w1);
            a[j][0] += x0 * w0;
            a[j][1] += x1 * w1;
        }
    }
    for (; i + 4 <= n; i += 4) {
        const f32x4 x0 = load(x + i);
        for (int j = 0; j < 4; ++j) a[j][0] += x0 * load(w + j * rs + i);
    }
    for (int j = 0; j < 4; ++j) {
        float tail = 0.0f;
        for (std::size_t k = i; k < n; ++k) tail += x[k] * widen1(w[j * rs + k]);
        out[j] = hsum(a[j][0], a[j][1]) + tail;
    }
}

/// dst[i] = float(src[i]).
inline void widen(const bf16* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        f32x4 lo, hi;
        load8(src + i, lo, hi);
        std::memcpy(dst + i, &lo, sizeof lo);
        std::memcpy(dst + i + 4, &hi, sizeof hi);
    }
    for (; i + 4 <= n; i += 4) {
        const f32x4 v = load(src + i);
        std::memcpy(dst + i, &v, sizeof v);
    }
    for (; i < n; ++i) dst[i] = to_f32(src[i]);
}

// Float vectors for the recurrent kernels' loops (isa/recurrent_body.inl): 4 floats.
using vf = f32x4;
inline constexpr std::size_t kW = 4;
inline vf vload(const float* p) noexcept { return load(p); }
inline void vstore(float* p, vf v) noexcept { std::memcpy(p, &v, sizeof v); }
inline vf vset(float x) noexcept { return vf{x, x, x, x}; }
inline vf vneg(vf a) noexcept { return std::bit_cast<vf>(std::bit_cast<u32x4>(a) ^ 0x80000000u); }
/// The float whose bits are (bits(t) - c) << 23, lane by lane (2^n in exp).
inline vf vshift_bits(vf t, std::uint32_t c) noexcept { return std::bit_cast<vf>((std::bit_cast<u32x4>(t) - c) << 23); }
/// (v0 + v2) + (v1 + v3): xsimd's SSE order.
inline float vhsum(vf v) noexcept { return (v[0] + v[2]) + (v[1] + v[3]); }
#else
inline float widen1(float v) noexcept { return v; }
inline float widen1(bf16 v) noexcept { return to_f32(v); }
template <class T>
inline float dot(const float* x, const T* w, std::size_t n) noexcept {
    float acc = 0.0f;
    for (std::size_t i = 0; i < n; ++i) acc += x[i] * widen1(w[i]);
    return acc;
}
template <class T>
inline void dot4(const float* x, const T* w, std::size_t n, std::size_t rs, float* out) noexcept {
    for (std::size_t j = 0; j < 4; ++j) out[j] = dot(x, w + j * rs, n);
}
inline void widen(const bf16* src, float* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}

// Scalar stand-ins of the vector operations above (one lane) for compilers without vector extensions.
using vf = float;
inline constexpr std::size_t kW = 1;
inline vf vload(const float* p) noexcept { return *p; }
inline void vstore(float* p, vf v) noexcept { *p = v; }
inline vf vset(float x) noexcept { return x; }
inline vf vneg(vf a) noexcept { return -a; }
inline vf vshift_bits(vf t, std::uint32_t c) noexcept { return std::bit_cast<vf>((std::bit_cast<std::uint32_t>(t) - c) << 23); }
inline float vhsum(vf v) noexcept { return v; }
#endif

// The arithmetic of both: the same operators on 4-float vectors and on plain floats.
inline vf vadd(vf a, vf b) noexcept { return a + b; }
inline vf vsub(vf a, vf b) noexcept { return a - b; }
inline vf vmul(vf a, vf b) noexcept { return a * b; }
inline vf vdiv(vf a, vf b) noexcept { return a / b; }
/// (a < b) ? a : b and (a > b) ? a : b lane by lane (the semantics of minps / maxps).
inline vf vmin(vf a, vf b) noexcept { return a < b ? a : b; }
inline vf vmax(vf a, vf b) noexcept { return a > b ? a : b; }

}  // namespace hylens::kernels::isa::baseline
