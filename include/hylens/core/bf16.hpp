#pragma once
// bfloat16 and IEEE half conversions to and from float32, bit-exact both ways.
// Narrowing rounds to nearest, ties to even; NaN stays NaN (quiet), infinities stay infinite.

#include <bit>      // std::bit_cast
#include <cstdint>  // std::uint16_t, std::uint32_t
#include <cstddef>  // std::size_t

namespace hylens {

/// A bfloat16 value held as its 16 raw bits (the upper half of a float32).
struct bf16 {
    std::uint16_t bits = 0;
};

/// An IEEE 754 binary16 value held as its 16 raw bits.
struct f16 {
    std::uint16_t bits = 0;
};

inline float to_f32(bf16 v) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16);
}

inline bf16 to_bf16(float f) noexcept {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, force a quiet payload
        return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
    }
    const std::uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;  // round to nearest even; overflow carries into the exponent (-> inf)
    return bf16{static_cast<std::uint16_t>(u >> 16)};
}

inline float to_f32(f16 v) noexcept {
    const std::uint32_t h = v.bits;
    const std::uint32_t sign = (h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t out;
    if (exp == 0) {
        if (mant == 0) {
            out = sign;
        } else {  // subnormal half: normalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            out = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        out = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u);
    } else {
        out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(out);
}

inline f16 to_f16(float f) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return f16{static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};
    if (abs >= 0x477ff000u) {  // >= 65520 rounds to infinity
        return f16{static_cast<std::uint16_t>(sign | 0x7c00u)};
    }
    if (abs < 0x38800000u) {  // result is subnormal or zero (|f| < 2^-14)
        if (abs < 0x33000000u) return f16{static_cast<std::uint16_t>(sign)};  // < 2^-25: rounds to 0
        const std::uint32_t e = abs >> 23;
        const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - e;  // 14 + (113 - e) ... value = m * 2^(e-150), half sub unit 2^-24
        const std::uint32_t q = m >> shift;
        const std::uint32_t rem = m & ((1u << shift) - 1u);
        const std::uint32_t half = 1u << (shift - 1u);
        std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
        return f16{static_cast<std::uint16_t>(sign | r)};
    }
    std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15 (shifted by 13)
    const std::uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;
    return f16{static_cast<std::uint16_t>(sign | (r >> 13))};
}

/// Widens n bf16 values to float32.
inline void widen(const bf16* src, float* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(src[i].bits) << 16);
}

}  // namespace hylens
