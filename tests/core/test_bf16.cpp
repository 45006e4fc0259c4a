#include <hylens/core/bf16.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

using namespace hylens;

namespace {
// Reference bf16 rounding through double arithmetic: pick the nearer of the two bf16
// neighbours, ties to the even mantissa.
std::uint16_t bf16_reference(float f) {
    if (std::isnan(f)) return 0x7fc0;
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
    const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
    const double dlo = std::bit_cast<float>(static_cast<std::uint32_t>(lo) << 16);
    const double dhi = std::bit_cast<float>(static_cast<std::uint32_t>(hi) << 16);
    const double x = f;
    const double elo = std::fabs(x - dlo), ehi = std::isinf(dhi) ? std::fabs(x - dlo) * 2 + 1 : std::fabs(x - dhi);
    if ((u & 0xffffu) == 0) return lo;
    if ((u & 0xffffu) == 0x8000u) return (lo & 1u) ? hi : lo;
    if (std::isinf(dhi)) return (u & 0xffffu) >= 0x8000u ? hi : lo;
    return elo < ehi ? lo : hi;
}
}  // namespace

TEST_CASE("bf16: every bit pattern survives widening and narrowing") {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const bf16 v{static_cast<std::uint16_t>(b)};
        const float f = to_f32(v);
        if (std::isnan(f)) {
            CHECK(std::isnan(to_f32(to_bf16(f))));
        } else {
            REQUIRE(to_bf16(f).bits == v.bits);
        }
    }
}

TEST_CASE("bf16: narrowing rounds to nearest even") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (int i = 0; i < 200000; ++i) {
        const float f = std::bit_cast<float>(bits(rng));
        if (std::isnan(f)) continue;
        REQUIRE(to_bf16(f).bits == bf16_reference(f));
    }
    CHECK(to_bf16(1.00390625f).bits == 0x3f80);   // exactly half way, even below
    CHECK(to_bf16(1.01171875f).bits == 0x3f82);   // half way, odd below -> up
    CHECK(to_bf16(3.4e38f).bits == 0x7f80);       // rounds to +inf
    CHECK(to_bf16(-0.0f).bits == 0x8000);
}

// The compiler's IEEE half type: g++ 12 has _Float16 in C++ on x86-64 but not on aarch64, which
// has the ACLE's __fp16 (converted by the FCVT instructions, so correctly rounded too).
#if defined(__aarch64__) && defined(__ARM_FP16_FORMAT_IEEE)
#define HYLENS_TEST_COMPILER_HALF __fp16
#elif defined(__FLT16_MAX__)
#define HYLENS_TEST_COMPILER_HALF _Float16
#endif

#ifdef HYLENS_TEST_COMPILER_HALF
TEST_CASE("f16: matches the compiler's half type (_Float16, __fp16) in both directions") {
    using Half = HYLENS_TEST_COMPILER_HALF;
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const f16 v{static_cast<std::uint16_t>(b)};
        const Half h = std::bit_cast<Half>(static_cast<std::uint16_t>(b));
        const float ref = static_cast<float>(h);
        const float got = to_f32(v);
        if (std::isnan(ref)) {
            REQUIRE(std::isnan(got));
            continue;
        }
        REQUIRE(std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(ref));
        REQUIRE(to_f16(got).bits == v.bits);
    }
    std::mt19937 rng(11);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (int i = 0; i < 300000; ++i) {
        const float f = std::bit_cast<float>(bits(rng) & 0xc7ffffffu);  // bias towards half's range
        if (std::isnan(f)) continue;
        const std::uint16_t ref = std::bit_cast<std::uint16_t>(static_cast<Half>(f));
        REQUIRE(to_f16(f).bits == ref);
    }
}
#endif
