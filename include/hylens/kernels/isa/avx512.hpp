#pragma once
// The AVX-512 level of the dispatched kernels (core/simd.hpp), compiled with
// __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,..."))) whatever the includer's
// flags. Same operations and per-row arithmetic pattern as kernels/isa/baseline.hpp, on
// 16-float vectors; tails use masked loads instead of a scalar loop. Only intrinsics that take
// an explicit source or zero mask are used: the forms that fill with _mm*_undefined_*()
// (_mm512_extractf64x4_pd, _mm512_castps512_ps256, _mm512_reduce_add_ps, ...) make g++ 12 at -O1 report a false
// -Wuninitialized inside avx512fintrin.h (GCC bug 105593), fatal under -Werror.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uintptr_t

#include "../../core/bf16.hpp"
#include "../../core/simd.hpp"

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx512 {

HYLENS_TARGET_AVX512 inline __m512 load(const float* p) noexcept { return _mm512_loadu_ps(p); }
HYLENS_TARGET_AVX512 inline __m512 load(const bf16* p) noexcept {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}
HYLENS_TARGET_AVX512 inline __m512 load_masked(const float* p, __mmask16 k) noexcept {
    return _mm512_maskz_loadu_ps(k, p);
}
HYLENS_TARGET_AVX512 inline __m512 load_masked(const bf16* p, __mmask16 k) noexcept {
    const __m256i h = _mm256_maskz_loadu_epi16(k, p);
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}
HYLENS_TARGET_AVX512 inline float hsum(__m512 a, __m512 b) noexcept {
    const __m512 s = _mm512_add_ps(a, b);
    const __m256 z = _mm256_setzero_ps();  // (even _mm512_castps512_ps256 uses an undefined fill in g++ 12)
    const __m256 h = _mm256_add_ps(_mm512_mask_extractf32x8_ps(z, 0xFF, s, 0), _mm512_mask_extractf32x8_ps(z, 0xFF, s, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}
inline __mmask16 tail_mask(std::size_t r) noexcept { return static_cast<__mmask16>((1u << r) - 1u); }

template <class T>
HYLENS_TARGET_AVX512 inline float dot(const float* x, const T* w, std::size_t n) noexcept {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(load(x + i), load(w + i), a0);
        a1 = _mm512_fmadd_ps(load(x + i + 16), load(w + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load(x + i), load(w + i), a0);
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        a1 = _mm512_fmadd_ps(load_masked(x + i, k), load_masked(w + i, k), a1);
    }
    return hsum(a0, a1);
}

template <class T>
HYLENS_TARGET_AVX512 inline void dot4(const float* x, const T* w, std::size_t n, std::size_t rs, float* out) noexcept {
    __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const T *w0 = w, *w1 = w + rs, *w2 = w + 2 * rs, *w3 = w + 3 * rs;
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 x0 = load(x + i), x1 = load(x + i + 16);
        a00 = _mm512_fmadd_ps(x0, load(w0 + i), a00);
        a01 = _mm512_fmadd_ps(x1, load(w0 + i + 16), a01);
        a10 = _mm512_fmadd_ps(x0, load(w1 + i), a10);
        a11 = _mm512_fmadd_ps(x1, load(w1 + i + 16), a11);
        a20 = _mm512_fmadd_ps(x0, load(w2 + i), a20);
        a21 = _mm512_fmadd_ps(x1, load(w2 + i + 16), a21);
        a30 = _mm512_fmadd_ps(x0, load(w3 + i), a30);
        a31 = _mm512_fmadd_ps(x1, load(w3 + i + 16), a31);
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 x0 = load(x + i);
        a00 = _mm512_fmadd_ps(x0, load(w0 + i), a00);
        a10 = _mm512_fmadd_ps(x0, load(w1 + i), a10);
        a20 = _mm512_fmadd_ps(x0, load(w2 + i), a20);
        a30 = _mm512_fmadd_ps(x0, load(w3 + i), a30);
    }
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 x0 = load_masked(x + i, k);
        a01 = _mm512_fmadd_ps(x0, load_masked(w0 + i, k), a01);
        a11 = _mm512_fmadd_ps(x0, load_masked(w1 + i, k), a11);
        a21 = _mm512_fmadd_ps(x0, load_masked(w2 + i, k), a21);
        a31 = _mm512_fmadd_ps(x0, load_masked(w3 + i, k), a31);
    }
    out[0] = hsum(a00, a01);
    out[1] = hsum(a10, a11);
    out[2] = hsum(a20, a21);
    out[3] = hsum(a30, a31);
}

/// dot4 for float32 rows that are not 64-byte aligned (a safetensors tensor starts 8-byte
/// aligned at best, so most checkpoints' rows are not): each 16-float vector of a row is built
/// from the two aligned vectors around it (VPERMT2PS) instead of a load that spans two cache
/// lines. The vectors, and so the sums and their order, are exactly the unaligned loads', so the
/// result is bitwise the template's. Split loads cost 20-25 % of a decode's read rate on a Zen 5
/// core (docs/performance.md, "Decode: weights not aligned to cache lines"). Used when the four
/// rows share one misalignment (rs a multiple of 16) and a row is long enough for the loop.
HYLENS_TARGET_AVX512 inline void dot4(const float* x, const float* w, std::size_t n, std::size_t rs,
                                      float* out) noexcept {
    const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(w);
    const std::size_t s = (addr % 64) / sizeof(float);
    if (s == 0 || addr % sizeof(float) != 0 || rs % 16 != 0 || n < 48) return dot4<float>(x, w, n, rs, out);
    // Lane j of the vector at w + i is lane s + j of the pair (aligned vector at w + i - s, the next).
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(s)),
                                         _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    const __mmask16 from_s = static_cast<__mmask16>(~tail_mask(s));  // the first aligned vector's lanes inside the row
    const float* r[4] = {w - s, w + rs - s, w + 2 * rs - s, w + 3 * rs - s};
    __m512 lo[4];
    for (int j = 0; j < 4; ++j) lo[j] = _mm512_maskz_load_ps(from_s, r[j]);
    __m512 acc[4][2];
    for (int j = 0; j < 4; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    std::size_t i = 0;
    // The aligned vectors read end at w + i + 48 - s <= w + n.
    for (; i + 48 <= n; i += 32) {
        const __m512 x0 = load(x + i), x1 = load(x + i + 16);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const __m512 mid = _mm512_load_ps(r[j] + i + 16), hi = _mm512_load_ps(r[j] + i + 32);
            acc[j][0] = _mm512_fmadd_ps(x0, _mm512_permutex2var_ps(lo[j], idx, mid), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(x1, _mm512_permutex2var_ps(mid, idx, hi), acc[j][1]);
            lo[j] = hi;
        }
    }
    // The rest as the template does it, from i (a multiple of 32, as in its main loop).
    for (; i + 32 <= n; i += 32) {
        const __m512 x0 = load(x + i), x1 = load(x + i + 16);
        for (int j = 0; j < 4; ++j) {
            acc[j][0] = _mm512_fmadd_ps(x0, load(w + j * rs + i), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(x1, load(w + j * rs + i + 16), acc[j][1]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 x0 = load(x + i);
        for (int j = 0; j < 4; ++j) acc[j][0] = _mm512_fmadd_ps(x0, load(w + j * rs + i), acc[j][0]);
    }
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 x0 = load_masked(x + i, k);
        for (int j = 0; j < 4; ++j) acc[j][1] = _mm512_fmadd_ps(x0, load_masked(w + j * rs + i, k), acc[j][1]);
    }
    for (int j = 0; j < 4; ++j) out[j] = hsum(acc[j][0], acc[j][1]);
}

HYLENS_TARGET_AVX512 inline void widen(const bf16* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load(src + i));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, k, load_masked(src + i, k));
    }
}


// A 16 x 16 transpose of 32-bit words: r[i] holds row i's words 0-15; afterwards r[j] holds
// word j of rows 0-15 (the zero-masked forms: see above). Per 128-bit lane, 32-bit then 64-bit interleaves make each lane hold
// four rows of one word; two rounds of 128-bit lane shuffles then gather the four row groups.
HYLENS_TARGET_AVX512 inline void transpose16(__m512i* r) noexcept {
    __m512i t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_maskz_unpacklo_epi32(0xFFFF, r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_maskz_unpackhi_epi32(0xFFFF, r[2 * i], r[2 * i + 1]);
    }
    __m512i s[4][4];  // s[g][j]: in lane L, word 4L + j of rows 4g .. 4g + 3
    for (int g = 0; g < 4; ++g) {
        s[g][0] = _mm512_maskz_unpacklo_epi64(0xFF, t[4 * g], t[4 * g + 2]);
        s[g][1] = _mm512_maskz_unpackhi_epi64(0xFF, t[4 * g], t[4 * g + 2]);
        s[g][2] = _mm512_maskz_unpacklo_epi64(0xFF, t[4 * g + 1], t[4 * g + 3]);
        s[g][3] = _mm512_maskz_unpackhi_epi64(0xFF, t[4 * g + 1], t[4 * g + 3]);
    }
    for (int j = 0; j < 4; ++j) {
        const __m512i v0 = _mm512_maskz_shuffle_i32x4(0xFFFF, s[0][j], s[1][j], 0x44), v1 = _mm512_maskz_shuffle_i32x4(0xFFFF, s[0][j], s[1][j], 0xEE);
        const __m512i v2 = _mm512_maskz_shuffle_i32x4(0xFFFF, s[2][j], s[3][j], 0x44), v3 = _mm512_maskz_shuffle_i32x4(0xFFFF, s[2][j], s[3][j], 0xEE);
        r[j] = _mm512_maskz_shuffle_i32x4(0xFFFF, v0, v2, 0x88);       // word j      (lane 0 of every group)
        r[4 + j] = _mm512_maskz_shuffle_i32x4(0xFFFF, v0, v2, 0xDD);   // word 4 + j
        r[8 + j] = _mm512_maskz_shuffle_i32x4(0xFFFF, v1, v3, 0x88);   // word 8 + j
        r[12 + j] = _mm512_maskz_shuffle_i32x4(0xFFFF, v1, v3, 0xDD);  // word 12 + j
    }
}

/// A register tile of R rows x 32 columns of sums (the GEMM tiles of isa/avx512_gemm.hpp and
/// isa/avx512bf16.hpp) times alpha into C: row r to C + r * ldc, columns past nc (<= 32) not
/// written (masked stores).
template <std::size_t R>
HYLENS_TARGET_AVX512 inline void store_tile(const __m512 (&acc)[R][2], float* C, std::size_t ldc, std::size_t nc,
                                            float alpha) noexcept {
    const __mmask16 k0 = tail_mask(nc < 16 ? nc : 16);  // (tail_mask(16) is all 16)
    const __mmask16 k1 = nc > 16 ? tail_mask(nc - 16) : __mmask16{0};
    const __m512 s = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
    for (std::size_t r = 0; r < R; ++r) {
        _mm512_mask_storeu_ps(C + r * ldc, k0, _mm512_mul_ps(acc[r][0], s));
        _mm512_mask_storeu_ps(C + r * ldc + 16, k1, _mm512_mul_ps(acc[r][1], s));
    }
}

// Float vectors for the recurrent kernels' loops (isa/recurrent_body.inl): 16 floats. min / max
// in their zero-masked forms (the plain ones fill with _mm512_undefined_ps, see above).
using vf = __m512;
inline constexpr std::size_t kW = 16;
HYLENS_TARGET_AVX512 inline vf vload(const float* p) noexcept { return _mm512_loadu_ps(p); }
HYLENS_TARGET_AVX512 inline void vstore(float* p, vf v) noexcept { _mm512_storeu_ps(p, v); }
HYLENS_TARGET_AVX512 inline vf vset(float x) noexcept { return _mm512_set1_ps(x); }
HYLENS_TARGET_AVX512 inline vf vadd(vf a, vf b) noexcept { return _mm512_add_ps(a, b); }
HYLENS_TARGET_AVX512 inline vf vsub(vf a, vf b) noexcept { return _mm512_sub_ps(a, b); }
HYLENS_TARGET_AVX512 inline vf vmul(vf a, vf b) noexcept { return _mm512_mul_ps(a, b); }
HYLENS_TARGET_AVX512 inline vf vdiv(vf a, vf b) noexcept { return _mm512_div_ps(a, b); }
HYLENS_TARGET_AVX512 inline vf vmin(vf a, vf b) noexcept { return _mm512_maskz_min_ps(0xFFFF, a, b); }
HYLENS_TARGET_AVX512 inline vf vmax(vf a, vf b) noexcept { return _mm512_maskz_max_ps(0xFFFF, a, b); }
HYLENS_TARGET_AVX512 inline vf vneg(vf a) noexcept {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}
HYLENS_TARGET_AVX512 inline vf vshift_bits(vf t, std::uint32_t c) noexcept {
    const __m512i b = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(static_cast<int>(c)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, b, 23));
}
/// xsimd's AVX-512 order: the two 8-float halves added, then ((h0 + h4) + (h1 + h5)) +
/// ((h2 + h6) + (h3 + h7)), so a build with -march=native keeps the results of the xsimd code
/// this replaced bit for bit.
HYLENS_TARGET_AVX512 inline float vhsum(vf v) noexcept {
    const __m256 z = _mm256_setzero_ps();
    const __m256 h = _mm256_add_ps(_mm512_mask_extractf32x8_ps(z, 0xFF, v, 0), _mm512_mask_extractf32x8_ps(z, 0xFF, v, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 d = _mm_hadd_ps(q, q);
    return _mm_cvtss_f32(_mm_hadd_ps(d, d));
}

}  // namespace hylens::kernels::isa::avx512
#endif
