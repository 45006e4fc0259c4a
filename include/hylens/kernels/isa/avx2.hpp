#pragma once
// The AVX2 + FMA level of the dispatched kernels (core/simd.hpp), compiled with
// __attribute__((target("avx2,fma"))) whatever the includer's flags. Same operations and the
// same per-row arithmetic pattern as kernels/isa/baseline.hpp, on 8-float vectors.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t

#include "../../core/bf16.hpp"
#include "../../core/simd.hpp"

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx2 {

HYLENS_TARGET_AVX2 inline __m256 load(const float* p) noexcept { return _mm256_loadu_ps(p); }
HYLENS_TARGET_AVX2 inline __m256 load(const bf16* p) noexcept {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
HYLENS_TARGET_AVX2 inline float hsum(__m256 a, __m256 b) noexcept {
    const __m256 s = _mm256_add_ps(a, b);
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}
inline float widen1(float v) noexcept { return v; }
inline float widen1(bf16 v) noexcept { return to_f32(v); }

template <class T>
HYLENS_TARGET_AVX2 inline float dot(const float* x, const T* w, std::size_t n) noexcept {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load(x + i), load(w + i), a0);
        a1 = _mm256_fmadd_ps(load(x + i + 8), load(w + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load(x + i), load(w + i), a0);
    float tail = 0.0f;
    for (; i < n; ++i) tail += x[i] * widen1(w[i]);
    return hsum(a0, a1) + tail;
}

/// out[j] = sum_i x[i] * w[j * rs + i] for the four rows j < 4 (float32 or bf16 rows). Without
/// the software prefetch of the other levels (row_prefetch.hpp): on the AVX2-only CPU measured
/// (AMD Zen 3), the F32 decode ran 1.08-1.14x faster without it than with each row prefetched
/// 1 KiB ahead (256 B ahead: 1.06-1.13x, 512 B: 1.02-1.08x), bf16 rows 0.99-1.01x (builds
/// compared in one process: docs/performance-log.md, "An AVX2-only machine").
template <class T>
HYLENS_TARGET_AVX2 inline void dot4(const float* x, const T* w, std::size_t n, std::size_t rs, float* out) noexcept {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const T *w0 = w, *w1 = w + rs, *w2 = w + 2 * rs, *w3 = w + 3 * rs;
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 x0 = load(x + i), x1 = load(x + i + 8);
        a00 = _mm256_fmadd_ps(x0, load(w0 + i), a00);
        a01 = _mm256_fmadd_ps(x1, load(w0 + i + 8), a01);
        a10 = _mm256_fmadd_ps(x0, load(w1 + i), a10);
        a11 = _mm256_fmadd_ps(x1, load(w1 + i + 8), a11);
        a20 = _mm256_fmadd_ps(x0, load(w2 + i), a20);
        a21 = _mm256_fmadd_ps(x1, load(w2 + i + 8), a21);
        a30 = _mm256_fmadd_ps(x0, load(w3 + i), a30);
        a31 = _mm256_fmadd_ps(x1, load(w3 + i + 8), a31);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 x0 = load(x + i);
        a00 = _mm256_fmadd_ps(x0, load(w0 + i), a00);
        a10 = _mm256_fmadd_ps(x0, load(w1 + i), a10);
        a20 = _mm256_fmadd_ps(x0, load(w2 + i), a20);
        a30 = _mm256_fmadd_ps(x0, load(w3 + i), a30);
    }
    float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
    for (; i < n; ++i) {
        t0 += x[i] * widen1(w0[i]);
        t1 += x[i] * widen1(w1[i]);
        t2 += x[i] * widen1(w2[i]);
        t3 += x[i] * widen1(w3[i]);
    }
    out[0] = hsum(a00, a01) + t0;
    out[1] = hsum(a10, a11) + t1;
    out[2] = hsum(a20, a21) + t2;
    out[3] = hsum(a30, a31) + t3;
}

HYLENS_TARGET_AVX2 inline void widen(const bf16* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load(src + i));
    for (; i < n; ++i) dst[i] = to_f32(src[i]);
}


// Float vectors for the recurrent kernels' loops (isa/recurrent_body.inl): 8 floats.
using vf = __m256;
inline constexpr std::size_t kW = 8;
HYLENS_TARGET_AVX2 inline vf vload(const float* p) noexcept { return _mm256_loadu_ps(p); }
HYLENS_TARGET_AVX2 inline void vstore(float* p, vf v) noexcept { _mm256_storeu_ps(p, v); }
HYLENS_TARGET_AVX2 inline vf vset(float x) noexcept { return _mm256_set1_ps(x); }
HYLENS_TARGET_AVX2 inline vf vadd(vf a, vf b) noexcept { return _mm256_add_ps(a, b); }
HYLENS_TARGET_AVX2 inline vf vsub(vf a, vf b) noexcept { return _mm256_sub_ps(a, b); }
HYLENS_TARGET_AVX2 inline vf vmul(vf a, vf b) noexcept { return _mm256_mul_ps(a, b); }
HYLENS_TARGET_AVX2 inline vf vdiv(vf a, vf b) noexcept { return _mm256_div_ps(a, b); }
HYLENS_TARGET_AVX2 inline vf vmin(vf a, vf b) noexcept { return _mm256_min_ps(a, b); }
HYLENS_TARGET_AVX2 inline vf vmax(vf a, vf b) noexcept { return _mm256_max_ps(a, b); }
HYLENS_TARGET_AVX2 inline vf vneg(vf a) noexcept {
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(a), _mm256_set1_epi32(static_cast<int>(0x80000000u))));
}
HYLENS_TARGET_AVX2 inline vf vshift_bits(vf t, std::uint32_t c) noexcept {
    const __m256i b = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(static_cast<int>(c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(b, 23));
}
/// ((v0 + v4) + (v1 + v5)) + ((v2 + v6) + (v3 + v7)): xsimd's AVX order.
HYLENS_TARGET_AVX2 inline float vhsum(vf v) noexcept {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_hadd_ps(q, q);
    return _mm_cvtss_f32(_mm_hadd_ps(d, d));
}

}  // namespace hylens::kernels::isa::avx2
#endif
