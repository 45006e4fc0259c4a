// SPDX-License-Identifier: Apache-2.0
// Added and special tokens of a tokenizer.json: matched in the text before BPE, with their
// lstrip / rstrip / single_word / normalized flags.
#pragma once

#include <algorithm>    // std::max
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int32_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <unordered_set>  // std::unordered_set
#include <utility>      // std::pair
#include <vector>       // std::vector

#include "hylens/text/bpe.hpp"
#include "hylens/text/normalizer.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// One entry of tokenizer.json's "added_tokens".
struct AddedToken {
    std::string content;
    TokenId id = -1;
    bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

/// A piece of a sentence found by AddedVocabulary::find: [begin, end) in bytes, with the id of
/// the added token it is, or -1 for text between added tokens.
struct AddedMatch {
    std::size_t begin, end;
    TokenId id;
};

/// A byte trie over token contents for leftmost-longest matching.
class TokenTrie {
public:
    void insert(std::string_view s, std::size_t value) {
        std::size_t node = 0;
        for (const char c : s) {
            const auto b = static_cast<unsigned char>(c);
            std::int32_t next = -1;
            for (const auto& [byte, child] : nodes_[node].kids)
                if (byte == b) next = child;
            if (next < 0) {
                next = static_cast<std::int32_t>(nodes_.size());
                nodes_[node].kids.push_back({b, next});
                nodes_.emplace_back();
            }
            node = static_cast<std::size_t>(next);
        }
        nodes_[node].value = static_cast<std::int64_t>(value);
        first_bytes_[static_cast<unsigned char>(s[0])] = true;
    }

    bool empty() const noexcept { return nodes_.size() == 1; }

    /// Longest entry starting at s[pos]: (length, value), or length 0.
    std::pair<std::size_t, std::size_t> longest_at(std::string_view s, std::size_t pos) const {
        std::pair<std::size_t, std::size_t> best{0, 0};
        if (!first_bytes_[static_cast<unsigned char>(s[pos])]) return best;
        std::size_t node = 0;
        for (std::size_t i = pos; i < s.size(); ++i) {
            std::int32_t next = -1;
            for (const auto& [byte, child] : nodes_[node].kids)
                if (byte == static_cast<unsigned char>(s[i])) next = child;
            if (next < 0) break;
            node = static_cast<std::size_t>(next);
            if (nodes_[node].value >= 0) best = {i + 1 - pos, static_cast<std::size_t>(nodes_[node].value)};
        }
        return best;
    }

private:
    struct Node {
        std::vector<std::pair<unsigned char, std::int32_t>> kids;
        std::int64_t value = -1;
    };
    std::vector<Node> nodes_{Node{}};
    bool first_bytes_[256] = {};
};

/// The added tokens and the two tries that find them: one over the raw text for tokens with
/// normalized = false, one over normalized text for the others (Hugging Face
/// AddedVocabulary::extract_and_normalize).
class AddedVocabulary {
public:
    AddedVocabulary() = default;

    AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer& normalizer) : tokens_(std::move(tokens)) {
        for (std::size_t i = 0; i < tokens_.size(); ++i) {
            const AddedToken& t = tokens_[i];
            if (t.content.empty()) continue;  // the reference ignores empty tokens
            if (t.special) special_.insert(t.content);
            if (t.normalized) {
                const std::string norm = normalizer.apply(t.content);
                if (!norm.empty()) normalized_trie_.insert(norm, i);
            } else {
                raw_trie_.insert(t.content, i);
            }
        }
    }

    const std::vector<AddedToken>& tokens() const noexcept { return tokens_; }
    bool is_special(std::string_view content) const { return special_.count(std::string(content)) > 0; }

    /// Splits s into added tokens and the text between them, covering all of s.
    std::vector<AddedMatch> find(std::string_view s, bool normalized) const {
        const TokenTrie& trie = normalized ? normalized_trie_ : raw_trie_;
        std::vector<AddedMatch> out;
        if (trie.empty() || s.empty()) {
            out.push_back({0, s.size(), -1});
            return out;
        }
        std::size_t done = 0;  // end of the previous accepted match
        std::size_t pos = 0;
        while (pos < s.size()) {
            const auto [len, index] = trie.longest_at(s, pos);
            if (len == 0) {
                ++pos;
                continue;
            }
            const AddedToken& t = tokens_[index];
            std::size_t start = pos, stop = pos + len;
            pos = stop;  // the reference's iterator resumes after a match even if it is rejected
            if (t.single_word) {
                const bool left_ok = start == 0 || !is_word_char(last_char(s.substr(0, start)));
                const bool right_ok = stop == s.size() || !is_word_char(first_char(s.substr(stop)));
                if (!left_ok || !right_ok) continue;
            }
            if (t.lstrip) {
                std::size_t b = start;
                while (b > 0) {
                    std::size_t p = b - 1;
                    while (p > 0 && !is_lead_byte(static_cast<unsigned char>(s[p]))) --p;
                    std::size_t q = p;
                    if (!is_whitespace(decode_utf8(s, q))) break;
                    b = p;
                }
                start = std::max(b, done);
            }
            if (t.rstrip) {
                std::size_t e = stop;
                while (e < s.size()) {
                    std::size_t q = e;
                    if (!is_whitespace(decode_utf8(s, q))) break;
                    e = q;
                }
                stop = e;  // the search still resumes at the token's own end, as in the reference
            }
            if (done < start) out.push_back({done, start, -1});
            out.push_back({start, stop, t.id});
            done = stop;
        }
        if (done < s.size()) out.push_back({done, s.size(), -1});
        return out;
    }

private:
    static char32_t first_char(std::string_view s) {
        std::size_t p = 0;
        return decode_utf8(s, p);
    }
    static char32_t last_char(std::string_view s) {
        std::size_t p = s.size() - 1;
        while (p > 0 && !is_lead_byte(static_cast<unsigned char>(s[p]))) --p;
        return decode_utf8(s, p);
    }

    std::vector<AddedToken> tokens_;
    std::unordered_set<std::string> special_;
    TokenTrie raw_trie_, normalized_trie_;
};

}  // namespace hylens::text
