#pragma once
// Config: a read-only view of one JSON object from a Hugging Face config.json (or any JSON
// file: tokenizer configs, index files). Typed getters check the type and say what they got:
//   cfg.sub("text_config").get_int("hidden_size")
//   -> ConfigError "[config] m/config.json: text_config.hidden_size: expected an integer, got string \"64\""
// "Absent" and "null" are the same thing to the *_or-fallback getters, because HF configs write
// `null` for "use the default" (e.g. "mamba_d_ssm": null). A present value of the wrong type
// is always an error, even when a fallback is given.
//
// This is the one io header that includes nlohmann/json.hpp in its interface (json()).

#include <algorithm>    // std::min
#include <cmath>        // std::isfinite, std::trunc
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <filesystem>   // std::filesystem::path
#include <fstream>      // std::ifstream
#include <iterator>     // std::istreambuf_iterator
#include <limits>       // std::numeric_limits
#include <memory>       // std::shared_ptr
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include <nlohmann/json.hpp>  // nlohmann::json

#include "../core/error.hpp"
#include "json_depth.hpp"
#include "json_error.hpp"

namespace hylens::io {

class Config {
public:
    using json = nlohmann::json;

    /// Reads and parses `path`. FormatError naming the file if it cannot be read, is not valid
    /// JSON (with line, column and byte of the defect) or is not a JSON object.
    static Config from_file(const std::filesystem::path& path) {
        if (std::filesystem::is_directory(path)) fail<FormatError>("[config] ", path.string(), ": a directory, not a JSON file");
        // A FIFO blocked the read forever, a device (/dev/zero) read until memory ran out.
        if (std::filesystem::exists(path) && !std::filesystem::is_regular_file(path))
            fail<FormatError>("[config] ", path.string(), ": not a regular file (a pipe or a device?)");
        std::ifstream in(path, std::ios::binary);
        if (!in) fail<FormatError>("[config] ", path.string(), ": cannot open");
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (in.bad()) fail<FormatError>("[config] ", path.string(), ": read error");
        return parse(text, path.string());
    }

    /// Parses JSON text; `origin` names it in messages.
    static Config parse(std::string_view text, std::string origin = "<string>") {
        auto root = std::make_shared<json>();
        try {
            const std::string cleaned = replace_nonfinite(text);
            check_json_depth(cleaned, "[config] " + origin);
            *root = json::parse(cleaned.begin(), cleaned.end());
        } catch (const json::parse_error& e) {
            // e.byte is 1-based and points just past the offending character.
            const std::size_t at = e.byte == 0 ? 0 : std::min<std::size_t>(e.byte - 1, text.size());
            std::size_t line = 1, col = 1;
            for (std::size_t i = 0; i < at; ++i) {
                if (text[i] == '\n') {
                    ++line;
                    col = 1;
                } else {
                    ++col;
                }
            }
            fail<FormatError>("[config] ", origin, ": malformed JSON at line ", line, ", column ", col, " (byte ", at,
                              "): ", detail::json_error_reason(e.what()));
        } catch (const json::exception& e) {  // e.g. a number too large for a double
            fail<FormatError>("[config] ", origin, ": malformed JSON: ", e.what());
        }
        if (!root->is_object())
            fail<FormatError>("[config] ", origin, ": expected a JSON object at the top level, got ", root->type_name());
        const json* node = root.get();
        return Config(std::move(root), node, std::move(origin), "");
    }

    /// Present and not null.
    bool has(std::string_view key) const {
        const json* v = find(key);
        return v != nullptr && !v->is_null();
    }
    /// Absent or null.
    bool is_null(std::string_view key) const { return !has(key); }
    /// Present and a JSON object.
    bool is_object(std::string_view key) const {
        const json* v = find(key);
        return v != nullptr && v->is_object();
    }

    /// The nested object under `key`. ConfigError if it is missing, null or not an object.
    Config sub(std::string_view key) const {
        const json& v = require(key, "an object");
        if (!v.is_object()) wrong(key, "an object", v);
        return Config(root_, &v, origin_, key_path(key));
    }

    std::int64_t get_int(std::string_view key) const { return as_int(require(key, "an integer"), key_path(key)); }
    std::int64_t get_int(std::string_view key, std::int64_t fallback) const {
        return has(key) ? get_int(key) : fallback;
    }
    double get_double(std::string_view key) const { return as_double(require(key, "a number"), key_path(key)); }
    double get_double(std::string_view key, double fallback) const { return has(key) ? get_double(key) : fallback; }
    /// A scale factor (a µP multiplier, logits_scaling): finite, above zero and within a float.
    /// ConfigError otherwise: a zero or negative one made every logit 0 or flipped them, silently.
    /// A scale factor (a multiplier, logits_scaling): positive, finite and a normal float
    /// (a negative one flipped a path, zero erased it).
    static bool is_scale_factor(double v) noexcept {
        return std::isfinite(v) && v > 0.0 && v <= std::numeric_limits<float>::max() &&
               static_cast<float>(v) >= std::numeric_limits<float>::min();
    }
    float get_multiplier(std::string_view key, double fallback = 1.0) const {
        const double v = get_double(key, fallback);
        if (!is_scale_factor(v))
            fail<ConfigError>("[config] ", origin_, ": ", key_path(key), " must be a positive finite number (a scale "
                              "factor), got ", v);
        return static_cast<float>(v);
    }
    bool get_bool(std::string_view key) const {
        const json& v = require(key, "a boolean");
        if (!v.is_boolean()) wrong(key, "a boolean", v);
        return v.get<bool>();
    }
    bool get_bool(std::string_view key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }
    std::string get_string(std::string_view key) const { return as_string(require(key, "a string"), key_path(key)); }
    std::string get_string(std::string_view key, std::string fallback) const {
        return has(key) ? get_string(key) : fallback;
    }

    std::vector<std::string> get_string_list(std::string_view key) const {
        return list<std::string>(key, "a list of strings", &Config::as_string);
    }
    std::vector<double> get_double_list(std::string_view key) const {
        return list<double>(key, "a list of numbers", &Config::as_double);
    }
    std::vector<std::int64_t> get_int_list(std::string_view key) const {
        return list<std::int64_t>(key, "a list of integers", &Config::as_int);
    }

    /// Keys of this object (sorted).
    std::vector<std::string> keys() const {
        std::vector<std::string> out;
        for (auto it = node_->begin(); it != node_->end(); ++it) out.push_back(it.key());
        return out;
    }

    /// The file (or origin string) this config came from.
    std::string path() const { return origin_; }
    /// Where this object sits in the file: "" at the top, "text_config" for sub("text_config").
    const std::string& key_prefix() const noexcept { return prefix_; }
    /// This object as compact JSON text.
    std::string dump() const { return node_->dump(); }
    /// The underlying JSON value (for shapes of config this class does not cover).
    const json& raw() const noexcept { return *node_; }

private:
    Config(std::shared_ptr<const json> root, const json* node, std::string origin, std::string prefix)
        : root_(std::move(root)), node_(node), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

    std::string key_path(std::string_view key) const {
        return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
    }

    const json* find(std::string_view key) const {
        auto it = node_->find(key);
        return it == node_->end() ? nullptr : &*it;
    }

    const json& require(std::string_view key, const char* expected) const {
        const json* v = find(key);
        if (v == nullptr) fail<ConfigError>("[config] ", origin_, ": missing key '", key_path(key), "' (expected ", expected, ")");
        if (v->is_null()) fail<ConfigError>("[config] ", origin_, ": ", key_path(key), ": expected ", expected, ", got null");
        return *v;
    }

    /// "string \"64\"" / "number 1.5": the type and a short rendering of the value.
    static std::string describe(const json& v) {
        // The non-finite literals as config.json wrote them (replace_nonfinite's markers).
        if (v.is_string()) {
            const std::string& s = v.get_ref<const std::string&>();
            if (s == kPosInf) return "number Infinity";
            if (s == kNegInf) return "number -Infinity";
            if (s == kNaN) return "number NaN";
        }
        std::string text = v.dump();
        if (text.size() > 60) text = text.substr(0, 57) + "...";
        return std::string(v.type_name()) + " " + text;
    }

    [[noreturn]] void wrong_at(const std::string& where, const char* expected, const json& v) const {
        fail<ConfigError>("[config] ", origin_, ": ", where, ": expected ", expected, ", got ", describe(v));
    }
    [[noreturn]] void wrong(std::string_view key, const char* expected, const json& v) const {
        wrong_at(key_path(key), expected, v);
    }

    std::int64_t as_int(const json& v, const std::string& where) const {
        if (v.is_number_unsigned()) {
            const auto u = v.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                wrong_at(where, "an integer that fits in int64", v);
            return static_cast<std::int64_t>(u);
        }
        if (v.is_number_integer()) return v.get<std::int64_t>();
        if (v.is_number_float()) {
            // Some configs write integers as 1e6 or 4096.0; accept them when they are exact.
            const double d = v.get<double>();
            if (std::isfinite(d) && std::trunc(d) == d && d >= -9.2e18 && d <= 9.2e18) return static_cast<std::int64_t>(d);
        }
        wrong_at(where, "an integer", v);
    }
    double as_double(const json& v, const std::string& where) const {
        if (v.is_string()) {  // the non-finite literals of Python's json (see replace_nonfinite)
            const std::string& s = v.get_ref<const std::string&>();
            if (s == kPosInf) return std::numeric_limits<double>::infinity();
            if (s == kNegInf) return -std::numeric_limits<double>::infinity();
            if (s == kNaN) return std::numeric_limits<double>::quiet_NaN();
        }
        if (!v.is_number()) wrong_at(where, "a number", v);
        return v.get<double>();
    }

    // Python's json module (and so transformers' save_pretrained) writes float("inf") as the
    // bare literal Infinity, e.g. "time_step_limit": [0.0, Infinity]. Strict JSON parsers
    // reject it; outside strings we rewrite Infinity, -Infinity and NaN into marker strings
    // that as_double() reads back as the non-finite values.
    static constexpr const char* kPosInf = "\x01hylens:+Infinity";
    static constexpr const char* kNegInf = "\x01hylens:-Infinity";
    static constexpr const char* kNaN = "\x01hylens:NaN";
    static std::string replace_nonfinite(std::string_view text) {
        std::string out;
        out.reserve(text.size());
        bool in_string = false;
        for (std::size_t i = 0; i < text.size(); ++i) {
            const char c = text[i];
            if (in_string) {
                out += c;
                if (c == '\\' && i + 1 < text.size()) {
                    out += text[++i];
                } else if (c == '"') {
                    in_string = false;
                }
                continue;
            }
            if (c == '"') {
                in_string = true;
                out += c;
                continue;
            }
            auto word = [&](std::string_view w) { return text.substr(i, w.size()) == w; };
            if (word("-Infinity")) {
                out += std::string("\"") + "\\u0001hylens:-Infinity\"";
                i += 8;
            } else if (word("Infinity")) {
                out += std::string("\"") + "\\u0001hylens:+Infinity\"";
                i += 7;
            } else if (word("NaN")) {
                out += std::string("\"") + "\\u0001hylens:NaN\"";
                i += 2;
            } else {
                out += c;
            }
        }
        return out;
    }
    std::string as_string(const json& v, const std::string& where) const {
        if (!v.is_string()) wrong_at(where, "a string", v);
        return v.get<std::string>();
    }

    template <class T>
    std::vector<T> list(std::string_view key, const char* expected,
                        T (Config::*convert)(const json&, const std::string&) const) const {
        const json& v = require(key, expected);
        if (!v.is_array()) wrong(key, expected, v);
        std::vector<T> out;
        out.reserve(v.size());
        for (std::size_t i = 0; i < v.size(); ++i)
            out.push_back((this->*convert)(v[i], key_path(key) + "[" + std::to_string(i) + "]"));
        return out;
    }

    std::shared_ptr<const json> root_;
    const json* node_;  // points into *root_
    std::string origin_;
    std::string prefix_;
};

}  // namespace hylens::io
