#pragma once
// Element types of stored tensors (the safetensors set).

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "error.hpp"

namespace hylens {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2 };

inline std::size_t dtype_size(DType t) noexcept {
    switch (t) {
        case DType::F64: case DType::I64: case DType::U64: return 8;
        case DType::F32: case DType::I32: case DType::U32: return 4;
        case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
        default: return 1;
    }
}

inline std::string_view dtype_name(DType t) noexcept {
    switch (t) {
        case DType::F64: return "F64";
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::I64: return "I64";
        case DType::I32: return "I32";
        case DType::I16: return "I16";
        case DType::I8: return "I8";
        case DType::U64: return "U64";
        case DType::U32: return "U32";
        case DType::U16: return "U16";
        case DType::U8: return "U8";
        case DType::BOOL: return "BOOL";
        case DType::F8_E4M3: return "F8_E4M3";
        case DType::F8_E5M2: return "F8_E5M2";
    }
    return "?";
}

/// Parses a safetensors dtype string; returns false when unknown.
inline bool parse_dtype(std::string_view s, DType& out) noexcept {
    for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16, DType::I8,
                    DType::U64, DType::U32, DType::U16, DType::U8, DType::BOOL, DType::F8_E4M3, DType::F8_E5M2}) {
        if (dtype_name(t) == s) {
            out = t;
            return true;
        }
    }
    return false;
}

}  // namespace hylens
