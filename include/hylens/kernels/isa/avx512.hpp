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
#include "row_prefetch.hpp"

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

// The four rows' sums from element i (a multiple of 32) on, the way dot4's template runs them:
// acc[j][0] takes the first 16 values of each 32 and the last 16 before the tail, acc[j][1]
// the second 16 and the masked tail. The aligned-read forms below run their own loop over the
// first values and finish here, so every form adds the same vectors in the same order.
template <class T>
HYLENS_TARGET_AVX512 inline void dot4_from(const float* x, const T* w, std::size_t n, std::size_t rs, std::size_t i,
                                           __m512 (&acc)[4][2]) noexcept {
    // bf16 rows: two cache lines of each row a pass, as the float32 loop below reads (the same
    // vectors into the same accumulators in the same order as two of its passes: the same
    // bits). In a 1-thread harness of the decode's streams this read 1.04-1.09x the one-line
    // loop in 9 of 11 runs (docs/performance-log.md, "Decode side by side in three rounds, the
    // pool's automatic mode mended").
    if constexpr (sizeof(T) == 2)
        for (; i + 64 <= n; i += 64) {
            const __m512 x0 = load(x + i), x1 = load(x + i + 16), x2 = load(x + i + 32), x3 = load(x + i + 48);
#pragma GCC unroll 4
            for (std::size_t j = 0; j < 4; ++j) {
                prefetch_row_ahead(w + j * rs + i);
                prefetch_row_ahead(w + j * rs + i + 32);
                acc[j][0] = _mm512_fmadd_ps(x0, load(w + j * rs + i), acc[j][0]);
                acc[j][1] = _mm512_fmadd_ps(x1, load(w + j * rs + i + 16), acc[j][1]);
                acc[j][0] = _mm512_fmadd_ps(x2, load(w + j * rs + i + 32), acc[j][0]);
                acc[j][1] = _mm512_fmadd_ps(x3, load(w + j * rs + i + 48), acc[j][1]);
            }
        }
    for (; i + 32 <= n; i += 32) {
        const __m512 x0 = load(x + i), x1 = load(x + i + 16);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) {
            prefetch_row_ahead(w + j * rs + i);  // one prefetch per cache line (row_prefetch.hpp)
            if constexpr (sizeof(T) == 4) prefetch_row_ahead(w + j * rs + i + 16);
            acc[j][0] = _mm512_fmadd_ps(x0, load(w + j * rs + i), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(x1, load(w + j * rs + i + 16), acc[j][1]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 x0 = load(x + i);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) acc[j][0] = _mm512_fmadd_ps(x0, load(w + j * rs + i), acc[j][0]);
    }
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 x0 = load_masked(x + i, k);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) acc[j][1] = _mm512_fmadd_ps(x0, load_masked(w + j * rs + i, k), acc[j][1]);
    }
}

/// out[j] = hsum(acc[j][0], acc[j][1]) for the four rows, bit for bit: the same additions in the
/// same order, four rows in each instruction (lane j of a vector holds row j's partial sums):
/// about 18 instructions where four hsum calls take about 40, each a chain of dependent shuffles
/// and adds. A decode step ends a dot4 pass of four rows this way every 4-32 KiB of weights
/// (about 180,000 times a Qwen3.5-0.8B token); BF16 decode at 1 thread 1.01-1.02x
/// (docs/performance-log.md, "Where the 2-thread time goes; builds compared in one process").
HYLENS_TARGET_AVX512 inline void hsum4(const __m512 (&acc)[4][2], float* out) noexcept {
    __m512 s[4];
    for (std::size_t j = 0; j < 4; ++j) s[j] = _mm512_add_ps(acc[j][0], acc[j][1]);
    // hsum's lower + upper 256 bits: rows 0 and 1 in one vector, 2 and 3 in another.
    const __m512 h01 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xFFFF, s[0], s[1], 0x44),
                                     _mm512_maskz_shuffle_f32x4(0xFFFF, s[0], s[1], 0xEE));
    const __m512 h23 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xFFFF, s[2], s[3], 0x44),
                                     _mm512_maskz_shuffle_f32x4(0xFFFF, s[2], s[3], 0xEE));
    // Lower + upper 128 bits: row j in 128-bit lane j.
    const __m512 q = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xFFFF, h01, h23, 0x88),
                                   _mm512_maskz_shuffle_f32x4(0xFFFF, h01, h23, 0xDD));
    // In each lane (q0 + q2, q1 + q3) as with _mm_movehl_ps, then their sum as with _mm_movehdup_ps.
    const __m512 d = _mm512_add_ps(q, _mm512_maskz_permute_ps(0xFFFF, q, 0xEE));
    const __m512 r = _mm512_add_ps(d, _mm512_maskz_permute_ps(0xFFFF, d, 0x55));
    const __m512i firsts = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    _mm512_mask_storeu_ps(out, 0xF, _mm512_maskz_permutexvar_ps(0xF, firsts, r));
}

/// out[j] = sum_i x[i] * w[j * rs + i] for the four rows j < 4 (float32 or bf16 rows).
template <class T>
HYLENS_TARGET_AVX512 inline void dot4(const float* x, const T* w, std::size_t n, std::size_t rs, float* out) noexcept {
    __m512 acc[4][2];
    for (auto& a : acc) a[0] = a[1] = _mm512_setzero_ps();
    dot4_from(x, w, n, rs, 0, acc);
    hsum4(acc, out);
}

// Rows that do not start on a cache line. A checkpoint's tensors start 8-byte aligned at best
// (safetensors), so most rows do not, and then every vector load of a row spans two cache lines:
// split loads cost 20-25 % of a decode's read rate on a Zen 5 core (docs/performance.md,
// "Decode: weights not aligned to cache lines"). The two overloads below read the rows in
// aligned 64-byte vectors and build each vector the template would load from the two around it
// with one two-source permute (VPERMT2PS, VPERMT2W). The vectors, and so the sums and their
// order, are exactly the template's, so the result is bitwise the same (tested at every start).
// Used when the four rows share one misalignment (rs a multiple of 64 bytes) and a row is long
// enough for the loop; the first aligned vector is loaded masked to the row's own lanes.

/// Where the aligned forms apply, the elements of T by which w starts past a cache line; 0 where
/// they do not (aligned, or not on an element boundary, or rows of other misalignments, or
/// shorter than min_n): then the template runs.
template <class T>
inline std::size_t misalignment(const T* w, std::size_t rs, std::size_t n, std::size_t min_n) noexcept {
    const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(w);
    if (addr % sizeof(T) != 0 || rs % (64 / sizeof(T)) != 0 || n < min_n) return 0;
    return (addr % 64) / sizeof(T);
}

/// Float32 rows: lane j of the vector at w + i is lane s + j of the pair (aligned vector at
/// w + i - s, the next).
HYLENS_TARGET_AVX512 inline void dot4(const float* x, const float* w, std::size_t n, std::size_t rs,
                                      float* out) noexcept {
    const std::size_t s = misalignment(w, rs, n, 48);
    if (s == 0) return dot4<float>(x, w, n, rs, out);
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(s)),
                                         _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    const __mmask16 from_s = static_cast<__mmask16>(~tail_mask(s));
    const float* r[4] = {w - s, w + rs - s, w + 2 * rs - s, w + 3 * rs - s};
    __m512 lo[4], acc[4][2];
    for (std::size_t j = 0; j < 4; ++j) {
        lo[j] = _mm512_maskz_load_ps(from_s, r[j]);
        acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    }
    std::size_t i = 0;
    for (; i + 48 <= n; i += 32) {  // the aligned vectors read end at w + i + 48 - s <= w + n
        const __m512 x0 = load(x + i), x1 = load(x + i + 16);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) {
            prefetch_row_ahead(r[j] + i + 16);
            prefetch_row_ahead(r[j] + i + 32);
            const __m512 mid = _mm512_load_ps(r[j] + i + 16), hi = _mm512_load_ps(r[j] + i + 32);
            acc[j][0] = _mm512_fmadd_ps(x0, _mm512_permutex2var_ps(lo[j], idx, mid), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(x1, _mm512_permutex2var_ps(mid, idx, hi), acc[j][1]);
            lo[j] = hi;
        }
    }
    dot4_from(x, w, n, rs, i, acc);
    hsum4(acc, out);
}

/// bf16 rows, widened as they are picked: the 16-bit words of the pair (aligned vector at
/// w + i - s, the next: 64 values) that the vectors at w + i and w + i + 16 hold go to the
/// upper halves of the float32 lanes, zeros to the lower halves, as load(const bf16*) widens.
HYLENS_TARGET_AVX512 inline void dot4(const float* x, const bf16* w, std::size_t n, std::size_t rs,
                                      float* out) noexcept {
    const std::size_t s = misalignment(w, rs, n, 64);
    if (s == 0) return dot4<bf16>(x, w, n, rs, out);
    // Word 2j + 1 of the first vector is word s + j of the pair (the even words are zeroed).
    const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx0 = _mm512_maskz_slli_epi32(0xFFFF, _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(s))), 16);
    const __m512i idx1 = _mm512_add_epi32(idx0, _mm512_set1_epi32(16 << 16));
    constexpr __mmask32 odd = 0xAAAAAAAAu;
    const __mmask32 from_s = ~__mmask32{0} << s;
    const bf16* r[4] = {w - s, w + rs - s, w + 2 * rs - s, w + 3 * rs - s};
    __m512i lo[4];
    __m512 acc[4][2];
    for (std::size_t j = 0; j < 4; ++j) {
        lo[j] = _mm512_maskz_loadu_epi16(from_s, r[j]);
        acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    }
    std::size_t i = 0;
    for (; i + 64 <= n + s; i += 32) {  // the aligned vectors read end at w + i + 64 - s <= w + n
        const __m512 x0 = load(x + i), x1 = load(x + i + 16);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) {
            prefetch_row_ahead(r[j] + i + 32);
            const __m512i hi = _mm512_load_si512(r[j] + i + 32);
            acc[j][0] = _mm512_fmadd_ps(x0, _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi16(odd, lo[j], idx0, hi)), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(x1, _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi16(odd, lo[j], idx1, hi)), acc[j][1]);
            lo[j] = hi;
        }
    }
    dot4_from(x, w, n, rs, i, acc);
    hsum4(acc, out);
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
HYLENS_TARGET_AVX512 HYLENS_ALWAYS_INLINE inline void transpose16(__m512i* r) noexcept {
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
/// isa/avx512bf16.hpp) times alpha into C, or added to C's values when `accumulate`: row r to
/// C + r * ldc, columns past nc (<= 32) neither read nor written (masked loads and stores).
template <std::size_t R>
HYLENS_TARGET_AVX512 inline void store_tile(const __m512 (&acc)[R][2], float* C, std::size_t ldc, std::size_t nc,
                                            float alpha, bool accumulate = false) noexcept {
    const __mmask16 k0 = tail_mask(nc < 16 ? nc : 16);  // (tail_mask(16) is all 16)
    const __mmask16 k1 = nc > 16 ? tail_mask(nc - 16) : __mmask16{0};
    const __m512 s = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
    for (std::size_t r = 0; r < R; ++r) {
        float* c = C + r * ldc;
        __m512 v0 = _mm512_mul_ps(acc[r][0], s), v1 = _mm512_mul_ps(acc[r][1], s);
        if (accumulate) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, c), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, c + 16), v1);
        }
        _mm512_mask_storeu_ps(c, k0, v0);
        _mm512_mask_storeu_ps(c + 16, k1, v1);
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
