// SPDX-License-Identifier: Apache-2.0
// The normalizer of a tokenizer.json (Sequence, NFC/NFD/NFKC/NFKD, Replace, Prepend, Strip),
// applied to a NormalizedString with the reference's alignment rules.
#pragma once

#include <string>  // std::string
#include <vector>  // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/detail/json.hpp"
#include "hylens/text/normalized_string.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// A pattern of tokenizer.json: {"String": s} matches s literally, {"Regex": r} is a regex.
inline Regex parse_pattern(const detail::Json& j, std::string_view where) {
    check<FormatError>(j.is_object() && j.size() == 1, "[tokenizer.json ", where,
                       ".pattern] expected {\"String\": ...} or {\"Regex\": ...}");
    if (j.contains("String")) {
        const std::string s = detail::get_string(j, "String", where);
        return Regex(s, /*literal=*/true);
    }
    return Regex(detail::get_string(j, "Regex", where));
}

/// A chain of normalization steps (a Sequence is flattened into its steps).
class Normalizer {
public:
    enum class Kind { nfc, nfd, nfkc, nfkd, replace, prepend, strip };
    struct Step {
        Kind kind;
        Regex pattern;        // replace
        std::string content;  // replace, prepend
        bool left = false, right = false;  // strip
    };

    Normalizer() = default;

    /// Reads tokenizer.json's "normalizer" value (null gives the identity).
    static Normalizer from_json(const detail::Json& j) {
        Normalizer n;
        n.add(j, 0);
        return n;
    }

    bool empty() const noexcept { return steps_.empty(); }
    const std::vector<Step>& steps() const noexcept { return steps_; }

    void apply(NormalizedString& s) const {
        for (const Step& step : steps_) {
            switch (step.kind) {
                case Kind::nfc: s.normalize(NormalForm::nfc); break;
                case Kind::nfd: s.normalize(NormalForm::nfd); break;
                case Kind::nfkc: s.normalize(NormalForm::nfkc); break;
                case Kind::nfkd: s.normalize(NormalForm::nfkd); break;
                case Kind::replace: s.replace(regex_matches(step.pattern, s.get()), step.content); break;
                case Kind::prepend: s.prepend(step.content); break;
                case Kind::strip: s.strip(step.left, step.right); break;
            }
        }
    }

    /// The normalized form of a plain string (used for added tokens with normalized = true).
    std::string apply(std::string_view text) const {
        NormalizedString s(text, 0, text.size());
        apply(s);
        return s.get();
    }

private:
    void add(const detail::Json& j, int depth) {
        if (j.is_null()) return;
        check<FormatError>(depth < detail::kMaxJsonDepth, "[tokenizer.json normalizer] nested deeper than ",
                           detail::kMaxJsonDepth, " levels");
        const std::string type = detail::get_string(j, "type", "normalizer");
        if (type == "Sequence") {
            const auto& list = detail::require_array(j, "normalizers", "normalizer");
            for (const auto& sub : list) add(sub, depth + 1);
        } else if (type == "NFC") {
            steps_.push_back({Kind::nfc, {}, {}});
        } else if (type == "NFD") {
            steps_.push_back({Kind::nfd, {}, {}});
        } else if (type == "NFKC") {
            steps_.push_back({Kind::nfkc, {}, {}});
        } else if (type == "NFKD") {
            steps_.push_back({Kind::nfkd, {}, {}});
        } else if (type == "Replace") {
            steps_.push_back({Kind::replace, parse_pattern(detail::require(j, "pattern", "normalizer.Replace"), "normalizer.Replace"),
                              detail::get_string(j, "content", "normalizer.Replace")});
        } else if (type == "Prepend") {
            steps_.push_back({Kind::prepend, {}, detail::get_string(j, "prepend", "normalizer.Prepend")});
        } else if (type == "Strip") {
            Step s{Kind::strip, {}, {}};
            s.left = detail::get_bool_or(j, "strip_left", "normalizer.Strip", false);
            s.right = detail::get_bool_or(j, "strip_right", "normalizer.Strip", false);
            steps_.push_back(std::move(s));
        } else {
            fail<UnsupportedError>("[tokenizer.json normalizer] unsupported normalizer type '", type,
                                   "' (supported: Sequence, NFC, NFD, NFKC, NFKD, Replace, Prepend, Strip)");
        }
    }

    std::vector<Step> steps_;
};

}  // namespace hylens::text
