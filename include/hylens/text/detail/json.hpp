// SPDX-License-Identifier: Apache-2.0
// Checked accessors for tokenizer.json fields: wrong types and missing keys become
// hylens::FormatError naming the field, instead of nlohmann exceptions or crashes.
#pragma once

#include <cstdint>      // std::int64_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include <nlohmann/json.hpp>  // nlohmann::json

#include "hylens/core/error.hpp"

namespace hylens::text::detail {

using Json = nlohmann::json;

/// Nesting limit for Sequence components: tokenizer.json files nest two or three levels.
inline constexpr int kMaxJsonDepth = 32;

inline const char* json_type(const Json& j) noexcept { return j.type_name(); }

inline const Json& require(const Json& obj, std::string_view key, std::string_view where) {
    check<FormatError>(obj.is_object(), "[tokenizer.json ", where, "] expected an object, got ", json_type(obj));
    const auto it = obj.find(key);
    check<FormatError>(it != obj.end(), "[tokenizer.json ", where, "] missing field '", key, "'");
    return *it;
}

inline std::string get_string(const Json& obj, std::string_view key, std::string_view where) {
    const Json& v = require(obj, key, where);
    check<FormatError>(v.is_string(), "[tokenizer.json ", where, ".", key, "] expected a string, got ", json_type(v));
    return v.get<std::string>();
}

/// Optional string: absent or null gives fallback.
inline std::string get_string_or(const Json& obj, std::string_view key, std::string_view where, std::string fallback) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    check<FormatError>(it->is_string(), "[tokenizer.json ", where, ".", key, "] expected a string, got ", json_type(*it));
    return it->get<std::string>();
}

inline bool get_bool_or(const Json& obj, std::string_view key, std::string_view where, bool fallback) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    check<FormatError>(it->is_boolean(), "[tokenizer.json ", where, ".", key, "] expected a boolean, got ", json_type(*it));
    return it->get<bool>();
}

inline std::int64_t get_int_or(const Json& obj, std::string_view key, std::string_view where, std::int64_t lo, std::int64_t hi,
                               std::int64_t fallback) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    check<FormatError>(it->is_number_integer(), "[tokenizer.json ", where, ".", key, "] expected an integer, got ",
                       json_type(*it));
    const auto v = it->get<std::int64_t>();
    check<FormatError>(v >= lo && v <= hi, "[tokenizer.json ", where, ".", key, "] expected a value in [", lo, ", ", hi,
                       "], got ", v);
    return v;
}

/// The array obj[key] (the list of a Sequence component).
inline const Json& require_array(const Json& obj, std::string_view key, std::string_view where) {
    const Json& v = require(obj, key, where);
    check<FormatError>(v.is_array(), "[tokenizer.json ", where, ".", key, "] expected an array, got ", json_type(v));
    return v;
}

/// A single character given as a one-character string (Metaspace replacement, Strip content).
inline std::string get_char(const Json& obj, std::string_view key, std::string_view where, std::string fallback) {
    std::string s = get_string_or(obj, key, where, fallback);
    std::size_t chars = 0;
    for (const char c : s) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    check<FormatError>(chars == 1, "[tokenizer.json ", where, ".", key, "] expected one character, got '", s, "'");
    return s;
}

}  // namespace hylens::text::detail
