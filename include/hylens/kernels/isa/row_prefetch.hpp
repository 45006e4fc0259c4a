#pragma once
// Software prefetch for the decode kernels' weight rows (bf16 and float32).
//
// dot4 (isa/baseline.hpp, avx512.hpp, avx512bf16.hpp) reads four rows as four streams,
// which the hardware prefetchers keep fed only so far; a prefetch of each row's bytes 1 KiB
// ahead of the loads, one per cache line, keeps more lines in flight. Measured on AMD Zen 5
// (docs/performance-log.md, "Prefetching bf16 rows ahead; the caches in the decode floor" and
// "Float32 rows prefetched too"): in a 1-thread harness 1 KiB ahead read 1-4 % faster than none
// on a quiet machine and 10-26 % faster while the memory was loaded, 512 B less, 4-8 KiB 5-10 %
// slower; in the models' decode, paired rounds against the binary without it, bf16 rows gained
// 1.05-1.08x (1.14-1.15x with bf16 activations) and float32 rows 1.00-1.10x at avx512bf16,
// 1.12-1.18x at avx2 and 0.98-1.13x at the baseline level (once the aligned-read loop of
// misaligned rows was prefetched too; without it float32 did not gain). A prefetch past a row's
// end touches the next row of its stream, or at most 1 KiB past the matrix (a prefetch never
// faults). The sums are unchanged: only when lines arrive moves. The avx2 level does not
// prefetch: on an AVX2-only AMD Zen 3 the F32 decode ran 1.08-1.14x faster without (isa/avx2.hpp).
// The baseline level keeps it: it runs by default on CPUs not measured (x86-64 without AVX2,
// aarch64).
// On an Intel Xeon (Emerald Rapids, level avx512bf16; docs/performance-log.md, "Prefill and decode
// rounds on an Intel Xeon with AVX-512") 2 or 4 KiB ahead read as 1 KiB, into L2 only
// (prefetcht1) F32 1.02-1.07x but bf16 0.94x, and none bf16 0.82x: 1 KiB into all levels kept.
// On the Zen 5 again (session 31) a non-temporal prefetch (locality 0, prefetchnta) read within
// the noise of tools/ab's pairs: 0.91x Granite F32 and 0.94-1.05x on the BF16 models at 1 thread;
// 2 KiB ahead 0.93-1.08x at 1 thread (Falcon-H1 BF16 1.08x, Granite BF16 0.93x) and 1.04-1.12x
// at 2: mixed, not taken.

#include <cstddef>  // std::size_t

namespace hylens::kernels::isa {

/// How far ahead of the loads each weight row is prefetched, in bytes.
inline constexpr std::size_t kRowPrefetchBytes = 1024;

/// Values of T in one 64-byte cache line: a loop over a row prefetches once every this many.
template <class T>
inline constexpr std::size_t kValuesPerLine = 64 / sizeof(T);

/// Prefetch (for reading, into all cache levels) the cache line kRowPrefetchBytes past p.
/// (A no-op on compilers without __builtin_prefetch.)
inline void prefetch_row_ahead([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(static_cast<const char*>(p) + kRowPrefetchBytes, 0, 3);
#endif
}

}  // namespace hylens::kernels::isa
