// SPDX-License-Identifier: Apache-2.0
// Chat wrapping for the three supported families: one user turn plus the assistant prefill,
// rendered as the family's chat format, with the character span of each part.
#pragma once

#include <algorithm>    // std::find
#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/encoding.hpp"
#include "hylens/text/tokenizer.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens {

/// Model families with a chat format.
enum class ChatFamily { qwen35, granite4, falcon_h1 };

/// The text around one user message: bos + prefix + user + suffix + assistant prefill.
struct ChatFormat {
    std::string bos;     // BOS text the template itself writes ("" if none)
    std::string prefix;  // before the user message
    std::string suffix;  // after it, up to where the assistant's answer starts
};

/// The chat format of a family.
///  * Qwen3.5: the hand-written wrapper of protocols.md §A.4.2, with an empty think block so
///    that the answer is the very next token.
///  * Granite 4.0: the model's chat template rendered for one user message with
///    add_generation_prompt; with no system message the template writes its default one.
///  * Falcon-H1: the model's chat template (no tools), which starts with {{bos_token}};
///    Falcon-H1's BOS token is "<|begin_of_text|>".
/// The Qwen and Granite templates write no BOS; Falcon-H1's does.
inline ChatFormat chat_format(ChatFamily family) {
    switch (family) {
        case ChatFamily::qwen35:
            return {"", "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"};
        case ChatFamily::granite4:
            return {"",
                    "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are "
                    "professional, accurate, and safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>",
                    "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"};
        case ChatFamily::falcon_h1:
            return {"<|begin_of_text|>", "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"};
    }
    fail<Error>("[chat_format] unknown family");
}

struct ChatOptions {
    /// Write the BOS the template writes (Falcon-H1). Turn off when the caller adds its own
    /// BOS, or to compare with a prompt encoded without one.
    bool add_bos = true;
};

/// A rendered prompt and where its parts are, in characters of `text`.
struct ChatPrompt {
    std::string text;
    CharSpan user;     // the user message
    CharSpan prefill;  // the assistant prefill (empty span at the end if none)
    std::vector<std::string> specials{};  // the format's special-token strings ("<|im_start|>", "<think>", ...)
};

namespace detail {
/// The special-token strings of a chat format's text, in order, each once: "<|name|>" (a name
/// of letters, digits and '_') and Qwen's "<think>" and "</think>" (added tokens of its
/// tokenizer). Other text in angle brackets (an edited system message's "<answer>" or "<| to
/// start a list") is text.
inline void add_specials(std::string_view text, std::vector<std::string>& out) {
    const auto add = [&](std::string_view tok) {
        if (std::find(out.begin(), out.end(), tok) == out.end()) out.emplace_back(tok);
    };
    const auto name_char = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    };
    for (std::size_t b = text.find('<'); b != std::string_view::npos; b = text.find('<', b + 1)) {
        const std::string_view rest = text.substr(b);
        if (rest.rfind("<|", 0) == 0) {
            std::size_t e = 2;
            while (e < rest.size() && name_char(rest[e])) ++e;
            if (e > 2 && rest.substr(e).rfind("|>", 0) == 0) {
                add(rest.substr(0, e + 2));
                b += e + 1;
            }
        } else {
            for (std::string_view tag : {std::string_view("<think>"), std::string_view("</think>")})
                if (rest.rfind(tag, 0) == 0) add(tag);
        }
    }
}
}  // namespace detail

/// The special-token strings a chat format writes (its BOS, prefix and suffix), in order.
inline std::vector<std::string> chat_specials(const ChatFormat& format) {
    std::vector<std::string> out;
    detail::add_specials(format.bos, out);
    detail::add_specials(format.prefix, out);
    detail::add_specials(format.suffix, out);
    return out;
}

/// Checks that each of a chat format's special-token strings is a token of `tok` (FormatError
/// otherwise, naming the tokenizer as `whose`, e.g. "the judge's tokenizer"): a tokenizer
/// without them (another model's, or one with its added tokens removed) spells "<|im_start|>"
/// as ten ordinary tokens, and the model reads a prompt it was never trained on.
inline void require_chat_specials(const Tokenizer& tok, const std::vector<std::string>& specials,
                                  std::string_view whose = "the tokenizer") {
    for (const std::string& s : specials)
        check<FormatError>(tok.token_to_id(s).has_value(), "[chat] ", whose, " has no token '", s,
                           "', which the chat format writes (is it the model's tokenizer.json?)");
}

/// Renders user + prefill in the family's chat format.
inline ChatPrompt wrap_chat(const ChatFormat& format, std::string_view user, std::string_view prefill = {},
                            ChatOptions options = {}) {
    ChatPrompt p;
    if (options.add_bos) detail::add_specials(format.bos, p.specials);
    detail::add_specials(format.prefix, p.specials);
    detail::add_specials(format.suffix, p.specials);
    if (options.add_bos) p.text += format.bos;
    p.text += format.prefix;
    const std::string user_text = text::repair_utf8(user), prefill_text = text::repair_utf8(prefill);
    const std::size_t user_begin = text::count_chars(p.text);
    p.text += user_text;
    p.user = {user_begin, user_begin + text::count_chars(user_text)};
    p.text += format.suffix;
    const std::size_t prefill_begin = text::count_chars(p.text);
    p.text += prefill_text;
    p.prefill = {prefill_begin, prefill_begin + text::count_chars(prefill_text)};
    return p;
}

inline ChatPrompt wrap_chat(ChatFamily family, std::string_view user, std::string_view prefill = {}, ChatOptions options = {}) {
    return wrap_chat(chat_format(family), user, prefill, options);
}

/// Encodes a rendered prompt as a chat template's output is encoded: the special-token strings
/// in it become their tokens, and the post-processor adds nothing (add_special = false), so the
/// only BOS is the one the template wrote. Offsets refer to prompt.text. Each of the format's
/// special-token strings must be a token of `tok` (require_chat_specials).
inline Encoding encode_chat(const Tokenizer& tok, const ChatPrompt& prompt) {
    require_chat_specials(tok, prompt.specials);
    return tok.encode(prompt.text, {.add_special = false});
}

}  // namespace hylens
