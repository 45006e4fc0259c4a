// SPDX-License-Identifier: Apache-2.0
// The post-processor of a tokenizer.json (TemplateProcessing for BOS/EOS, ByteLevel offset
// trimming, Sequence).
#pragma once

#include <string>  // std::string
#include <vector>  // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/bpe.hpp"
#include "hylens/text/detail/json.hpp"
#include "hylens/text/encoding.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// A chain of post-processing steps.
class PostProcessor {
public:
    /// An element of a single-sequence template: a special token's ids, or the sequence.
    struct Piece {
        bool is_sequence = false;
        std::vector<TokenId> ids;
    };
    enum class Kind { byte_level, template_processing };
    struct Step {
        Kind kind;
        bool trim_offsets = false, add_prefix_space = false;  // byte_level
        std::vector<Piece> single;                            // template_processing
    };

    PostProcessor() = default;

    static PostProcessor from_json(const detail::Json& j) {
        PostProcessor p;
        p.add(j, 0);
        return p;
    }

    /// True if apply reads the token strings (ByteLevel offset trimming).
    bool reads_token_strings() const noexcept {
        for (const Step& s : steps_)
            if (s.kind == Kind::byte_level && s.trim_offsets) return true;
        return false;
    }

    /// Applies the steps. tokens[i] is the string of token i (used for offset trimming);
    /// special tokens are added only when add_special is set.
    void apply(Encoding& enc, std::vector<std::string>& tokens, bool add_special) const {
        for (const Step& step : steps_) {
            if (step.kind == Kind::byte_level) {
                if (step.trim_offsets) trim(enc, tokens, step.add_prefix_space);
                continue;
            }
            if (!add_special) continue;
            Encoding out;
            std::vector<std::string> out_tokens;
            for (const Piece& piece : step.single) {
                if (piece.is_sequence) {
                    out.ids.insert(out.ids.end(), enc.ids.begin(), enc.ids.end());
                    out.offsets.insert(out.offsets.end(), enc.offsets.begin(), enc.offsets.end());
                    out_tokens.insert(out_tokens.end(), tokens.begin(), tokens.end());
                } else {
                    for (const TokenId id : piece.ids) {
                        out.ids.push_back(id);
                        out.offsets.push_back({0, 0});
                        out_tokens.emplace_back();
                    }
                }
            }
            enc = std::move(out);
            tokens = std::move(out_tokens);
        }
    }

private:
    /// ByteLevel's trim_offsets: drop leading and trailing spaces ('Ġ' or White_Space) of each
    /// token from its offsets (Hugging Face process_offsets).
    static void trim(Encoding& enc, const std::vector<std::string>& tokens, bool add_prefix_space) {
        for (std::size_t i = 0; i < enc.size(); ++i) {
            const auto cps = to_code_points(tokens[i]);
            const auto space = [](char32_t c) { return c == 0x120 || is_whitespace(c); };
            std::size_t lead = 0, trail = 0;
            while (lead < cps.size() && space(cps[lead])) ++lead;
            while (trail < cps.size() && space(cps[cps.size() - 1 - trail])) ++trail;
            CharSpan& o = enc.offsets[i];
            if (lead > 0) {
                const bool is_first = i == 0 || o.begin == 0;
                if (is_first && add_prefix_space && lead == 1) lead = 0;
                o.begin = std::min(o.begin + lead, o.end);
            }
            if (trail > 0 && o.end >= trail) o.end = std::max(o.end - trail, o.begin);
        }
    }

    void add(const detail::Json& j, int depth) {
        if (j.is_null()) return;
        check<FormatError>(depth < detail::kMaxJsonDepth, "[tokenizer.json post_processor] nested deeper than ",
                           detail::kMaxJsonDepth, " levels");
        const std::string type = detail::get_string(j, "type", "post_processor");
        Step s{};
        if (type == "Sequence") {
            const auto& list = detail::require_array(j, "processors", "post_processor");
            for (const auto& sub : list) add(sub, depth + 1);
            return;
        } else if (type == "ByteLevel") {
            s.kind = Kind::byte_level;
            s.trim_offsets = detail::get_bool_or(j, "trim_offsets", "post_processor.ByteLevel", true);
            s.add_prefix_space = detail::get_bool_or(j, "add_prefix_space", "post_processor.ByteLevel", true);
        } else if (type == "TemplateProcessing") {
            s.kind = Kind::template_processing;
            const auto& single = detail::require(j, "single", "post_processor.TemplateProcessing");
            const auto& specials = detail::require(j, "special_tokens", "post_processor.TemplateProcessing");
            check<FormatError>(single.is_array() && specials.is_object(),
                               "[tokenizer.json post_processor.TemplateProcessing] expected 'single' to be an array and "
                               "'special_tokens' an object");
            for (const auto& item : single) {
                if (item.contains("Sequence")) {
                    s.single.push_back({true, {}});
                    continue;
                }
                const auto& sp = detail::require(item, "SpecialToken", "post_processor.TemplateProcessing.single");
                const std::string name = detail::get_string(sp, "id", "post_processor.TemplateProcessing.single");
                const auto& entry = detail::require(specials, name, "post_processor.TemplateProcessing.special_tokens");
                const auto& ids = detail::require(entry, "ids", "post_processor.TemplateProcessing.special_tokens");
                check<FormatError>(ids.is_array(), "[tokenizer.json post_processor.TemplateProcessing.special_tokens.",
                                   name, ".ids] expected an array");
                Piece piece;
                for (const auto& id : ids) {
                    check<FormatError>(id.is_number_unsigned() && id.get<std::uint64_t>() < (1u << 28),
                                       "[tokenizer.json post_processor.TemplateProcessing] special token '", name,
                                       "' has an invalid id");
                    piece.ids.push_back(static_cast<TokenId>(id.get<std::uint64_t>()));
                }
                s.single.push_back(std::move(piece));
            }
        } else {
            fail<UnsupportedError>("[tokenizer.json post_processor] unsupported post-processor type '", type,
                                   "' (supported: Sequence, ByteLevel, TemplateProcessing)");
        }
        steps_.push_back(std::move(s));
    }

    std::vector<Step> steps_;
};

}  // namespace hylens::text
