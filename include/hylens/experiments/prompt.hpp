#pragma once
// How the channel study turns a task item into token ids, and where it splits them.
//
// The user turn of the family's chat format (text/chat.hpp) holds the item's context followed
// directly by its query (the task writes any separator, such as a leading "\n", into the
// query). The rendered prompt
//
//     bos + prefix + context + query + suffix          (suffix: up to where the answer starts)
//
// is split at the character where the query begins:
//
//     context segment = bos + prefix + context          -> prefilled (source A; B: alt_context)
//     query segment   = query + suffix                  -> fed after the edited cache
//
// Each segment is tokenised on its own (special-token strings become their tokens, the
// post-processor adds nothing), so the context cache holds exactly the context text and every
// condition feeds the same query ids. FULL runs context ids ++ query ids; this can differ from
// tokenising the whole prompt in one piece only where a token would straddle the split.
//
// First-token match: the expected first token of an answer is the token of
// encode(query segment + answer) that covers the answer's first character (the answer
// tokenised in context, as it would follow the query).

#include <algorithm>    // std::find
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "../tasks/item.hpp"
#include "../text/chat.hpp"
#include "../text/tokenizer.hpp"
#include "../text/unicode.hpp"

namespace hylens::experiments {

/// The chat family of a config.json model_type.
inline ChatFamily chat_family(std::string_view model_type) {
    if (model_type.rfind("qwen3", 0) == 0) return ChatFamily::qwen35;
    if (model_type == "granitemoehybrid") return ChatFamily::granite4;
    if (model_type == "falcon_h1") return ChatFamily::falcon_h1;
    fail<UnsupportedError>("[experiment] no chat format for model_type '", model_type, "'");
}

inline std::string_view family_name(ChatFamily f) {
    switch (f) {
        case ChatFamily::qwen35: return "qwen3_5";
        case ChatFamily::granite4: return "granite4";
        case ChatFamily::falcon_h1: return "falcon_h1";
    }
    return "?";
}

/// The end-of-turn token strings of a family; generation stops at the first of them.
inline std::vector<std::string> end_of_turn_tokens(ChatFamily f) {
    switch (f) {
        case ChatFamily::qwen35: return {"<|im_end|>", "<|endoftext|>"};
        case ChatFamily::granite4: return {"<|end_of_text|>"};
        case ChatFamily::falcon_h1: return {"<|im_end|>", "<|end_of_text|>"};
    }
    return {};
}

/// One item as ids.
struct RenderedItem {
    std::vector<std::int64_t> context;      ///< context segment of source A
    std::vector<std::int64_t> alt_context;  ///< of source B (swap tasks; empty otherwise)
    std::vector<std::int64_t> query;        ///< query segment
    std::optional<std::int64_t> first_a;    ///< expected first token of expected[0]
    std::optional<std::int64_t> first_b;    ///< of alt_expected[0]
};

class PromptRenderer {
public:
    /// The format's special-token strings must be tokens of `tok` (require_chat_specials; an
    /// error names the tokenizer as `whose`).
    PromptRenderer(const Tokenizer& tok, ChatFamily family, std::string_view whose = "the tokenizer")
        : tok_(tok), format_(chat_format(family)) {
        require_chat_specials(tok, chat_specials(format_), whose);
        for (const auto& s : end_of_turn_tokens(family))
            if (auto id = tok.token_to_id(s)) stop_ids_.push_back(*id);
    }

    const ChatFormat& format() const noexcept { return format_; }
    /// Ids of the family's end-of-turn tokens that the tokenizer has.
    const std::vector<std::int64_t>& stop_ids() const noexcept { return stop_ids_; }

    std::string context_text(std::string_view context) const { return format_.bos + format_.prefix + std::string(context); }
    std::string query_text(std::string_view query) const { return std::string(query) + format_.suffix; }

    RenderedItem render(const tasks::Item& item, bool swap) const {
        RenderedItem r;
        r.context = encode(context_text(item.context));
        r.query = encode(query_text(item.query));
        check(!r.query.empty(), "[experiment] ", item.task, " item ", item.index, ": empty query segment");
        if (swap) r.alt_context = encode(context_text(item.alt_context));
        if (!item.expected.empty()) r.first_a = first_answer_token(item.query, item.expected[0]);
        if (swap && !item.alt_expected.empty()) r.first_b = first_answer_token(item.query, item.alt_expected[0]);
        return r;
    }

    /// The token of encode(query segment + answer) covering the answer's first character.
    std::optional<std::int64_t> first_answer_token(std::string_view query, std::string_view answer) const {
        if (answer.empty()) return std::nullopt;
        const std::string q = query_text(query);
        const std::size_t at = text::count_chars(q);
        const Encoding enc = tok_.encode(q + std::string(answer), {.add_special = false});
        for (std::size_t i = 0; i < enc.size(); ++i)
            if (enc.offsets[i].begin <= at && at < enc.offsets[i].end) return enc.ids[i];
        return std::nullopt;
    }

    /// Generated ids up to (not including) the first stop id, and whether one was produced.
    std::pair<std::vector<std::int64_t>, bool> until_stop(const std::vector<std::int64_t>& ids) const {
        for (std::size_t i = 0; i < ids.size(); ++i)
            if (std::find(stop_ids_.begin(), stop_ids_.end(), ids[i]) != stop_ids_.end())
                return {std::vector<std::int64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i)), true};
        return {ids, false};
    }

    /// Decoded text, special tokens removed.
    std::string decode(const std::vector<std::int64_t>& ids) const {
        std::vector<Tokenizer::TokenId> t;
        t.reserve(ids.size());
        for (auto id : ids) t.push_back(static_cast<Tokenizer::TokenId>(id));
        return tok_.decode(t, /*skip_special=*/true);
    }

private:
    std::vector<std::int64_t> encode(const std::string& s) const {
        const Encoding e = tok_.encode(s, {.add_special = false});
        return {e.ids.begin(), e.ids.end()};
    }

    const Tokenizer& tok_;
    ChatFormat format_;
    std::vector<std::int64_t> stop_ids_;
};

}  // namespace hylens::experiments
