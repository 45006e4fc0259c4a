// SPDX-License-Identifier: Apache-2.0
// Checked accessors for tokenizer.json fields: wrong types and missing keys become
// hylens::FormatError naming the field, instead of nlohmann exceptions or crashes.
#pragma once

#include <cstdint>      // std::int64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include <nlohmann/json.hpp>  // nlohmann::json

#include "hylens/core/error.hpp"
#include "hylens/io/json_depth.hpp"

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

/// A tokenizer.json parsed in one pass: the vocabulary and merges of "model" are read straight
/// into their final containers (they are 99% of the file; building them as a DOM first doubled
/// the load time), everything else into a DOM.
struct ParsedTokenizerJson {
    Json rest;
    bool has_vocab = false, has_merges = false;
    std::vector<std::pair<std::string, std::int64_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
};

/// Splits "a b" into its two tokens (the older merges format).
inline std::pair<std::string, std::string> split_merge(const std::string& s) {
    const auto sp = s.find(' ');
    check<FormatError>(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                       "[tokenizer.json model.merges] merge '", s, "' is not two tokens separated by one space");
    return {s.substr(0, sp), s.substr(sp + 1)};
}

class TokenizerJsonSax {
public:
    explicit TokenizerJsonSax(ParsedTokenizerJson& out) : out_(out) {}

    // A vocabulary id of null or a bool dropped its token without a word (a string was refused).
    bool null() {
        if (mode_ == Mode::vocab) fail<FormatError>("[tokenizer.json model.vocab] token '", key_, "' has a non-integer id (null)");
        return value(Json(nullptr));
    }
    bool boolean(bool v) {
        if (mode_ == Mode::vocab) fail<FormatError>("[tokenizer.json model.vocab] token '", key_, "' has a non-integer id (boolean)");
        return value(Json(v));
    }
    bool number_integer(Json::number_integer_t v) { return mode_ == Mode::vocab ? vocab_id(v) : value(Json(v)); }
    bool number_unsigned(Json::number_unsigned_t v) {
        if (mode_ == Mode::vocab && v > 0x7FFFFFFFFFFFFFFFull)  // it said "has id -1"
            fail<FormatError>("[tokenizer.json model.vocab] token '", key_, "' has id ", v, ", expected 0 <= id < 2^28");
        return mode_ == Mode::vocab ? vocab_id(static_cast<std::int64_t>(v)) : value(Json(v));
    }
    bool number_float(Json::number_float_t v, const std::string&) {
        check<FormatError>(mode_ == Mode::dom, "[tokenizer.json model.", mode_ == Mode::vocab ? "vocab" : "merges",
                           "] unexpected number ", v);
        return value(Json(v));
    }
    bool string(std::string& v) {
        if (mode_ == Mode::vocab) fail<FormatError>("[tokenizer.json model.vocab] token '", key_, "' has a non-integer id (string)");
        if (mode_ == Mode::merges) {
            if (inner_ == 0) out_.merges.push_back(split_merge(v));
            else pair_.push_back(std::move(v));
            return true;
        }
        return value(Json(std::move(v)));
    }
    bool binary(Json::binary_t&) { fail<FormatError>("[tokenizer.json] unexpected binary value"); }

    bool start_object(std::size_t) {
        check<FormatError>(mode_ == Mode::dom, "[tokenizer.json model.", mode_ == Mode::vocab ? "vocab" : "merges",
                           "] unexpected object");
        if (stack_.size() == 2 && path_model() && key_ == "vocab") {
            mode_ = Mode::vocab;
            out_.has_vocab = true;
            return true;
        }
        return open(Json::object());
    }
    bool key(std::string& k) {
        key_ = k;
        return true;
    }
    bool end_object() {
        if (mode_ == Mode::vocab) {
            mode_ = Mode::dom;
            return true;
        }
        return close();
    }
    bool start_array(std::size_t) {
        if (mode_ == Mode::vocab) fail<FormatError>("[tokenizer.json model.vocab] token '", key_, "' has a non-integer id (array)");
        if (mode_ == Mode::merges) {
            check<FormatError>(inner_ == 0, "[tokenizer.json model.merges] expected \"a b\" or [\"a\", \"b\"]");
            inner_ = 1;
            pair_.clear();
            return true;
        }
        if (stack_.size() == 2 && path_model() && key_ == "merges") {
            mode_ = Mode::merges;
            out_.has_merges = true;
            inner_ = 0;
            return true;
        }
        return open(Json::array());
    }
    bool end_array() {
        if (mode_ == Mode::merges) {
            if (inner_ == 0) {
                mode_ = Mode::dom;
                return true;
            }
            check<FormatError>(pair_.size() == 2, "[tokenizer.json model.merges] merge ", out_.merges.size(),
                               " has ", pair_.size(), " tokens, expected 2");
            out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
            inner_ = 0;
            return true;
        }
        return close();
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
        fail<FormatError>("[tokenizer.json] not valid JSON: ", e.what());
    }

private:
    enum class Mode { dom, vocab, merges };

    bool path_model() const { return stack_[0]->is_object() && stack_key_.size() >= 2 && stack_key_[1] == "model"; }

    bool vocab_id(std::int64_t v) {
        out_.vocab.emplace_back(key_, v);
        return true;
    }
    bool value(Json v) {
        if (mode_ == Mode::merges) fail<FormatError>("[tokenizer.json model.merges] merge ", out_.merges.size(), " is not made of strings");
        if (stack_.empty()) {
            out_.rest = std::move(v);
            return true;
        }
        Json& top = *stack_.back();
        if (top.is_object()) top[key_] = std::move(v);
        else top.push_back(std::move(v));
        return true;
    }
    bool open(Json v) {
        // nlohmann's json copies recursively: a file nested ~40,000 deep overflowed the stack.
        check<FormatError>(stack_.size() < io::kMaxJsonDepth, "[tokenizer.json] JSON nested deeper than ",
                           io::kMaxJsonDepth, " levels; no tokenizer.json nests more than a few");
        if (stack_.empty()) {
            out_.rest = std::move(v);
            stack_.push_back(&out_.rest);
        } else {
            Json& top = *stack_.back();
            Json* child = nullptr;
            if (top.is_object()) child = &(top[key_] = std::move(v));
            else top.push_back(std::move(v)), child = &top.back();
            stack_.push_back(child);
        }
        stack_key_.push_back(key_);
        return true;
    }
    bool close() {
        stack_.pop_back();
        stack_key_.pop_back();
        return true;
    }

    ParsedTokenizerJson& out_;
    Mode mode_ = Mode::dom;
    std::vector<Json*> stack_;           // open containers of the DOM
    std::vector<std::string> stack_key_;  // the key under which each open container sits
    std::string key_;
    int inner_ = 0;  // merges: 1 inside a ["a", "b"] pair
    std::vector<std::string> pair_;
};

/// Parses tokenizer.json text with TokenizerJsonSax.
inline ParsedTokenizerJson parse_tokenizer_json(std::string_view text) {
    ParsedTokenizerJson out;
    TokenizerJsonSax sax(out);
    Json::sax_parse(text.begin(), text.end(), &sax);
    return out;
}

}  // namespace hylens::text::detail
