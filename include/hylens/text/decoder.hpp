// SPDX-License-Identifier: Apache-2.0
// The decoder of a tokenizer.json (Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse,
// Strip): turns token strings back into text.
#pragma once

#include <string>  // std::string
#include <vector>  // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/detail/json.hpp"
#include "hylens/text/normalized_string.hpp"
#include "hylens/text/normalizer.hpp"
#include "hylens/text/pre_tokenizer.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// A chain of decoding steps over the list of token strings (a Sequence is flattened).
/// Without steps, decoding joins the tokens with spaces, as the reference does.
class Decoder {
public:
    enum class Kind { byte_level, metaspace, replace, byte_fallback, fuse, strip };
    struct Step {
        Kind kind;
        Regex pattern;            // replace
        std::string content;      // replace; metaspace replacement; strip character
        bool prepend = true;      // metaspace: prepend_scheme != never
        std::size_t start = 0, stop = 0;  // strip
    };

    Decoder() = default;

    static Decoder from_json(const detail::Json& j) {
        Decoder d;
        d.add(j, 0);
        return d;
    }

    bool empty() const noexcept { return steps_.empty(); }

    std::string decode(std::vector<std::string> tokens) const {
        if (steps_.empty()) {
            std::string out;
            for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
            return out;
        }
        for (const Step& step : steps_) tokens = run(step, std::move(tokens));
        std::string out;
        for (const auto& t : tokens) out += t;
        return out;
    }

private:
    static std::vector<std::string> run(const Step& step, std::vector<std::string> tokens) {
        switch (step.kind) {
            case Kind::byte_level: {
                // All tokens' characters back to bytes; a token with a character outside the
                // alphabet is taken as its UTF-8 bytes. Invalid UTF-8 becomes U+FFFD.
                const auto& table = byte_level_alphabet();
                std::string bytes;
                for (const auto& t : tokens) {
                    std::string mapped;
                    bool ok = true;
                    std::size_t pos = 0;
                    while (pos < t.size() && ok) {
                        const int b = table.byte_of(decode_utf8(t, pos));
                        ok = b >= 0;
                        mapped.push_back(static_cast<char>(b));
                    }
                    bytes += ok ? mapped : t;
                }
                return {repair_utf8(bytes)};
            }
            case Kind::metaspace: {
                const char32_t rep = to_code_points(step.content)[0];
                for (std::size_t i = 0; i < tokens.size(); ++i) {
                    std::string out;
                    std::size_t pos = 0;
                    while (pos < tokens[i].size()) {
                        const char32_t c = decode_utf8(tokens[i], pos);
                        if (c != rep) append_utf8(out, c);
                        else if (i != 0 || !step.prepend) out.push_back(' ');
                    }
                    tokens[i] = std::move(out);
                }
                return tokens;
            }
            case Kind::replace:
                for (auto& t : tokens) {
                    std::string out;
                    for (const auto& [r, is_match] : regex_matches(step.pattern, t))
                        out += is_match ? step.content : t.substr(r.first, r.second - r.first);
                    t = std::move(out);
                }
                return tokens;
            case Kind::byte_fallback: {
                std::vector<std::string> out;
                std::string pending;  // bytes of consecutive <0xXX> tokens
                std::size_t pending_count = 0;
                const auto flush = [&] {
                    if (pending_count == 0) return;
                    if (is_valid_utf8(pending)) out.push_back(pending);
                    else
                        for (std::size_t k = 0; k < pending_count; ++k) out.push_back("\xEF\xBF\xBD");
                    pending.clear();
                    pending_count = 0;
                };
                for (auto& t : tokens) {
                    const int byte = parse_byte_token(t);
                    if (byte >= 0) {
                        pending.push_back(static_cast<char>(byte));
                        ++pending_count;
                    } else {
                        flush();
                        out.push_back(std::move(t));
                    }
                }
                flush();
                return out;
            }
            case Kind::fuse: {
                std::string all;
                for (const auto& t : tokens) all += t;
                return {all};
            }
            case Kind::strip:
                for (auto& t : tokens) {
                    const auto cps = to_code_points(t);
                    const char32_t c = to_code_points(step.content)[0];
                    std::size_t b = 0, e = cps.size();
                    while (b < step.start && b < cps.size() && cps[b] == c) ++b;
                    for (std::size_t k = 0; k < step.stop && e > b && cps[e - 1] == c; ++k) --e;
                    std::string out;
                    for (std::size_t k = b; k < e; ++k) append_utf8(out, cps[k]);
                    t = std::move(out);
                }
                return tokens;
        }
        return tokens;
    }

    /// "<0xAB>" -> 0xAB, anything else -> -1.
    static int parse_byte_token(const std::string& t) {
        if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
        int v = 0;
        for (int k = 3; k < 5; ++k) {
            const char c = t[static_cast<std::size_t>(k)];
            int d = -1;
            if (c >= '0' && c <= '9') d = c - '0';
            else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        return v;
    }

    void add(const detail::Json& j, int depth) {
        if (j.is_null()) return;
        check<FormatError>(depth < detail::kMaxJsonDepth, "[tokenizer.json decoder] nested deeper than ",
                           detail::kMaxJsonDepth, " levels");
        const std::string type = detail::get_string(j, "type", "decoder");
        Step s{};
        if (type == "Sequence") {
            const auto& list = detail::require_array(j, "decoders", "decoder");
            for (const auto& sub : list) add(sub, depth + 1);
            return;
        } else if (type == "ByteLevel") {
            s.kind = Kind::byte_level;
        } else if (type == "Metaspace") {
            s.kind = Kind::metaspace;
            s.content = detail::get_char(j, "replacement", "decoder.Metaspace", "\u2581");
            s.prepend = detail::get_string_or(j, "prepend_scheme", "decoder.Metaspace", "always") != "never" &&
                        detail::get_bool_or(j, "add_prefix_space", "decoder.Metaspace", true);
        } else if (type == "Replace") {
            s.kind = Kind::replace;
            s.pattern = parse_pattern(detail::require(j, "pattern", "decoder.Replace"), "decoder.Replace");
            s.content = detail::get_string(j, "content", "decoder.Replace");
        } else if (type == "ByteFallback") {
            s.kind = Kind::byte_fallback;
        } else if (type == "Fuse") {
            s.kind = Kind::fuse;
        } else if (type == "Strip") {
            s.kind = Kind::strip;
            s.content = detail::get_char(j, "content", "decoder.Strip", " ");
            s.start = static_cast<std::size_t>(detail::get_int_or(j, "start", "decoder.Strip", 0, 1 << 20, 0));
            s.stop = static_cast<std::size_t>(detail::get_int_or(j, "stop", "decoder.Strip", 0, 1 << 20, 0));
        } else {
            fail<UnsupportedError>("[tokenizer.json decoder] unsupported decoder type '", type,
                                   "' (supported: Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip)");
        }
        steps_.push_back(std::move(s));
    }

    std::vector<Step> steps_;
};

}  // namespace hylens::text
