"""bfloat16 <-> float32 bit conversions for the anchor model writers (numpy only).

f32_to_bf16_bits rounds to nearest, ties to even (as PyTorch and hylens::to_bf16 do); NaN stays a
quiet NaN. bf16_bits_to_f32 is exact.
"""

import numpy as np


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), r)


def bf16_bits_to_f32(a: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
