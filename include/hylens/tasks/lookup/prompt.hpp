#pragma once
// Paper A's dictionary-lookup prompts (protocols.md §A.4.3): the templates chat / list / rev
// with 4, 8 or 16 pairs, and long (chat8 with filler text between the dictionary and the
// question), wrapped in a family's chat format (text/chat.hpp), with the character span of
// every part, and the token positions of every part recovered from the tokenizer's character
// offsets (a token belongs to a span if the two overlap).
//
//   chat  user    "Dictionary: k1=v1, k2=v2, ..., kN=vN.\nQuestion: What is the value of q?"
//         prefill "The value of q is **"
//         entry i = " ki=vi," (the leading space and the "," or "." included)
//   list  user    "Lookup table:\n* k1=v1\n* k2=v2\n...* kN=vN\nWhich value does q map to?"
//         prefill "The entry q maps to **"
//         entry i = "* ki=vi\n"
//   rev   user    "Dictionary: v1 is the value of k1, ..., vN is the value of kN.\nQuestion: What
//                  is the value of q?"
//         prefill "The value of q is **"
//         entry i = " vi is the value of ki" (the "," or "." not included)
//   long  chat, with filler (a text wrapped in newlines) after the dictionary.
// The question span starts at qstart's character: the "\n" before "Question" (chat, rev, long)
// or "Which" (list), and runs to the end of the user message. The answer is the bare value word,
// the very next token after "**".
//
// Spans are named "entry:i", "key:i", "value:i", "filler", "question", "user", "prefill" and
// "prefill_key" (the queried key inside the prefill); all are in characters of the whole
// wrapped prompt.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/item.hpp"
#include "hylens/tasks/text_builder.hpp"
#include "hylens/text/chat.hpp"
#include "hylens/text/encoding.hpp"
#include "hylens/text/tokenizer.hpp"

namespace hylens::tasks::lookup {

enum class Style { chat, list, rev };

/// A prompt variant of the battery: chat4 / chat8 / chat16 / list8 / rev8 / long / perm8.
struct Variant {
    Style style = Style::chat;
    std::size_t n_pairs = 8;
    bool long_filler = false;  ///< "long": filler between the dictionary and the question
    bool perm = false;         ///< "perm8": the target at every index, a random distractor

    std::string name() const {
        if (long_filler) return "long";
        if (perm) return "perm8";
        const char* s = style == Style::chat ? "chat" : style == Style::list ? "list" : "rev";
        return s + std::to_string(n_pairs);
    }
};

/// Parses a variant name (the names of Variant::name).
inline Variant parse_variant(std::string_view name) {
    if (name == "chat4") return {Style::chat, 4};
    if (name == "chat8") return {Style::chat, 8};
    if (name == "chat16") return {Style::chat, 16};
    if (name == "list8") return {Style::list, 8};
    if (name == "rev8") return {Style::rev, 8};
    if (name == "long") return {Style::chat, 8, true};
    if (name == "perm8") return {Style::chat, 8, false, true};
    fail<ShapeError>("[lookup] unknown prompt variant '", name, "' (chat4, chat8, chat16, list8, rev8, long, perm8)");
}

/// A rendered prompt: the wrapped text and its named character spans.
struct LookupText {
    std::string text;
    std::vector<TextSpan> spans;  ///< in = "prompt"
    std::vector<std::string> specials{};  ///< the chat format's special-token strings in `text`

    /// The span `name` (an error when missing).
    CharSpan span(std::string_view name) const {
        for (const TextSpan& s : spans)
            if (s.name == name) return {s.begin, s.end};
        fail<ShapeError>("[lookup] the prompt has no span '", name, "'");
    }
    CharSpan entry(std::size_t i) const { return span("entry:" + std::to_string(i)); }
    CharSpan key(std::size_t i) const { return span("key:" + std::to_string(i)); }
    CharSpan value(std::size_t i) const { return span("value:" + std::to_string(i)); }
};

/// Renders the dictionary (keys[i]=values[i] in presentation order) asking entry `query`, in
/// `style`, with `filler` (already wrapped in newlines, or empty) after the dictionary, wrapped
/// by `format`.
inline LookupText render(const ChatFormat& format, Style style, const std::vector<std::string>& keys,
                         const std::vector<std::string>& values, std::size_t query, std::string_view filler = {}) {
    check<ShapeError>(!keys.empty() && keys.size() == values.size(), "[lookup::render] ", keys.size(), " keys and ",
                      values.size(), " values");
    check<ShapeError>(query < keys.size(), "[lookup::render] queried entry ", query, " of ", keys.size());
    const std::size_t n = keys.size();
    const std::string& q = keys[query];
    std::vector<TextSpan> user_spans, prefill_spans;
    TextBuilder u("prompt", user_spans);
    const auto idx = [](const char* what, std::size_t i) { return std::string(what) + ":" + std::to_string(i); };
    if (style == Style::list) {
        u.add("Lookup table:\n");
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t e = u.mark();
            u.add("* ").add(idx("key", i), keys[i]).add("=").add(idx("value", i), values[i]).add("\n");
            u.close(idx("entry", i), e);
        }
    } else {
        u.add("Dictionary:");
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t e = u.mark();
            const char* punct = i + 1 < n ? "," : ".";
            if (style == Style::rev) {
                u.add(" ").add(idx("value", i), values[i]).add(" is the value of ").add(idx("key", i), keys[i]);
                u.close(idx("entry", i), e).add(punct);
            } else {
                u.add(" ").add(idx("key", i), keys[i]).add("=").add(idx("value", i), values[i]).add(punct);
                u.close(idx("entry", i), e);
            }
        }
    }
    if (!filler.empty()) u.add("filler", filler);
    const std::size_t qb = u.mark();
    if (style == Style::list)
        u.add("Which value does ").add("question_key", q).add(" map to?");
    else
        u.add("\nQuestion: What is the value of ").add("question_key", q).add("?");
    u.close("question", qb);

    TextBuilder p("prompt", prefill_spans);
    if (style == Style::list)
        p.add("The entry ").add("prefill_key", q).add(" maps to **");
    else
        p.add("The value of ").add("prefill_key", q).add(" is **");

    const ChatPrompt cp = wrap_chat(format, u.str(), p.str());
    LookupText out;
    out.text = cp.text;
    out.specials = cp.specials;
    for (TextSpan s : user_spans) {
        s.begin += cp.user.begin;
        s.end += cp.user.begin;
        out.spans.push_back(std::move(s));
    }
    for (TextSpan s : prefill_spans) {
        s.begin += cp.prefill.begin;
        s.end += cp.prefill.begin;
        out.spans.push_back(std::move(s));
    }
    out.spans.push_back({"user", "prompt", cp.user.begin, cp.user.end});
    out.spans.push_back({"prefill", "prompt", cp.prefill.begin, cp.prefill.end});
    return out;
}

/// Token ids and the token positions of every part of a rendered prompt.
struct LookupTokens {
    std::vector<std::int64_t> ids;
    Encoding encoding;                                ///< ids and character offsets
    std::vector<std::vector<std::size_t>> entries;    ///< positions of each entry's tokens
    std::vector<std::vector<std::size_t>> keys;       ///< positions of each entry's key
    std::vector<std::vector<std::size_t>> values;     ///< positions of each entry's value
    std::size_t qstart = 0;  ///< first token overlapping the question's first character
    std::size_t final = 0;   ///< T - 1

    std::size_t size() const noexcept { return ids.size(); }
};

/// Encodes a prompt (no special tokens added: the chat format writes its own) and recovers the
/// token positions of its parts from the character offsets. The chat format's special-token
/// strings must be tokens of `tok` (require_chat_specials).
inline LookupTokens tokenize(const Tokenizer& tok, const LookupText& t, std::size_t n_entries) {
    require_chat_specials(tok, t.specials);
    LookupTokens out;
    out.encoding = tok.encode(t.text);
    check<ShapeError>(!out.encoding.empty(), "[lookup::tokenize] the prompt encodes to no tokens");
    out.ids.assign(out.encoding.ids.begin(), out.encoding.ids.end());
    for (std::size_t i = 0; i < n_entries; ++i) {
        out.entries.push_back(span_to_positions(out.encoding, t.entry(i)));
        out.keys.push_back(span_to_positions(out.encoding, t.key(i)));
        out.values.push_back(span_to_positions(out.encoding, t.value(i)));
    }
    const CharSpan q = t.span("question");
    const std::vector<std::size_t> qpos = span_to_positions(out.encoding, {q.begin, q.begin + 1});
    check<ShapeError>(!qpos.empty(), "[lookup::tokenize] no token covers the question's first character");
    out.qstart = qpos.front();
    out.final = out.ids.size() - 1;
    return out;
}

/// Filler for the long variant: the first `n_tokens` tokens of `corpus` (as `tok` splits it),
/// decoded, trimmed of surrounding whitespace and wrapped in newlines.
inline std::string filler_text(const Tokenizer& tok, std::string_view corpus, std::size_t n_tokens) {
    std::vector<Tokenizer::TokenId> ids = tok.encode_ids(corpus);
    check<ShapeError>(ids.size() >= n_tokens, "[lookup::filler_text] the corpus has ", ids.size(),
                      " tokens, fewer than the ", n_tokens, " asked for");
    ids.resize(n_tokens);
    std::string s = tok.decode(ids);
    const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    std::size_t b = 0, e = s.size();
    while (b < e && space(s[b])) ++b;
    while (e > b && space(s[e - 1])) --e;
    return "\n" + s.substr(b, e - b) + "\n";
}

}  // namespace hylens::tasks::lookup
