#pragma once
// Software prefetch for the decode kernels' weight rows (bf16 and float32).
//
// dot4 (isa/baseline.hpp, avx2.hpp, avx512.hpp, avx512bf16.hpp) reads four rows as four streams,
// which the hardware prefetchers keep fed only so far; a prefetch of each row's bytes a fixed
// distance ahead of the loads keeps more lines in flight. Measured on AMD Zen 5
// (docs/performance.md, "Prefetching bf16 rows ahead; the caches in the decode floor" and
// "Float32 rows prefetched too"): in a harness (1 thread, 256 MiB in huge pages, kernels
// interleaved, 21 rounds) 1 KiB ahead read 1-4 % faster than none on a quiet machine and 10-26 %
// faster while the memory was loaded; 512 B gained less; 4 and 8 KiB read 5-10 % slower than
// none. In the models' decode (paired rounds against the binary without it) bf16 rows gained
// (1 thread: Qwen3.5-0.8B 1.05x, Granite 4.0 H 1.08x; with bf16 activations on VDPBF16PS 1.14x
// and 1.15x). Float32 rows prefetched in the template loop only did not (0.96x, 1.00x, session
// 17); prefetched in the aligned-read (permute) loop of misaligned rows as well, they did
// (session 18: 1 thread 1.05x / 1.00x / 1.05x for Qwen3.5 / Granite / Falcon-H1 F32, 2 threads
// 1.00x / 1.07x / 1.10x; forced avx2 1.12-1.18x; forced baseline 0.98-1.01x at 1 thread and
// 1.08-1.13x at 2, noisy): so every weight row is prefetched at every level, one prefetch per
// 64 bytes. A prefetch past a row's end touches the next row of its stream, or at most 1 KiB
// past the matrix (a prefetch never faults). The sums are unchanged: only when lines arrive
// moves.

#include <cstddef>  // std::size_t

namespace hylens::kernels::isa {

/// How far ahead of the loads each weight row is prefetched, in bytes.
inline constexpr std::size_t kRowPrefetchBytes = 1024;

/// Prefetch (for reading, into all cache levels) the cache line kRowPrefetchBytes past p.
/// (A no-op on compilers without __builtin_prefetch.)
inline void prefetch_row_ahead([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(static_cast<const char*>(p) + kRowPrefetchBytes, 0, 3);
#endif
}

}  // namespace hylens::kernels::isa
