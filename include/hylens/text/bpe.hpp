// SPDX-License-Identifier: Apache-2.0
// The BPE model of a tokenizer.json: vocabulary, ranked merges, byte fallback and unknown
// tokens, applied to one pre-tokenized word with a rank table, a heap over symbol pairs and
// a word cache.
#pragma once

#include <algorithm>      // std::max, std::min
#include <cstddef>        // std::size_t
#include <cstdint>        // std::int32_t, std::uint64_t
#include <functional>     // std::hash, std::equal_to
#include <memory>         // std::shared_ptr
#include <mutex>          // std::mutex, std::unique_lock
#include <optional>       // std::optional
#include <queue>          // std::priority_queue
#include <string>         // std::string
#include <string_view>    // std::string_view
#include <unordered_map>  // std::unordered_map
#include <utility>        // std::pair
#include <vector>         // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::text {

/// Token id. Vocabularies hold at most 2^31 - 1 tokens.
using TokenId = std::int32_t;

namespace detail {

/// Hash for string keys that also accepts string_view lookups.
struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

/// Open-addressing map from a pair of token ids to (rank, merged id): the inner loop of BPE
/// looks up every adjacent pair, and a flat table with linear probing is about 3x faster than
/// std::unordered_map here.
class PairTable {
public:
    struct Value {
        std::int32_t rank;
        TokenId id;
    };

    void reserve(std::size_t n) {
        std::size_t cap = 16;
        while (cap < 2 * n) cap <<= 1;
        keys_.assign(cap, kEmpty);
        values_.assign(cap, {});
        mask_ = cap - 1;
    }

    /// Inserts or overwrites (a later duplicate merge wins, as in the reference's HashMap).
    void insert(TokenId a, TokenId b, Value v) {
        if (keys_.empty() || 2 * (size_ + 1) > keys_.size()) grow();
        const std::uint64_t k = key(a, b);
        std::size_t i = slot(k);
        while (keys_[i] != kEmpty && keys_[i] != k) i = (i + 1) & mask_;
        if (keys_[i] == kEmpty) ++size_;
        keys_[i] = k;
        values_[i] = v;
    }

    const Value* find(TokenId a, TokenId b) const noexcept {
        if (keys_.empty()) return nullptr;
        const std::uint64_t k = key(a, b);
        for (std::size_t i = slot(k);; i = (i + 1) & mask_) {
            if (keys_[i] == k) return &values_[i];
            if (keys_[i] == kEmpty) return nullptr;
        }
    }

    std::size_t size() const noexcept { return size_; }

private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
    static std::uint64_t key(TokenId a, TokenId b) noexcept {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    }
    std::size_t slot(std::uint64_t k) const noexcept {
        return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 17) & mask_;
    }
    void grow() {
        std::vector<std::uint64_t> old_keys = std::move(keys_);
        std::vector<Value> old_values = std::move(values_);
        reserve(std::max<std::size_t>(16, old_keys.size()));
        size_ = 0;
        for (std::size_t i = 0; i < old_keys.size(); ++i)
            if (old_keys[i] != kEmpty)
                insert(static_cast<TokenId>(old_keys[i] >> 32), static_cast<TokenId>(old_keys[i] & 0xFFFFFFFFu), old_values[i]);
    }

    std::vector<std::uint64_t> keys_;
    std::vector<Value> values_;
    std::size_t mask_ = 0, size_ = 0;
};

}  // namespace detail

/// One token of a word: its id and its byte range [begin, end) in the word.
struct WordToken {
    TokenId id;
    std::uint32_t begin, end;
};

/// Options of the BPE model, as read from tokenizer.json's "model" object.
struct BpeOptions {
    std::optional<std::string> unk_token = {};
    std::string continuing_subword_prefix = {};  // "" when absent
    std::string end_of_word_suffix = {};         // "" when absent
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
};

/// A BPE model. Words are split into characters (or, in byte mode, into bytes whose keys are
/// the raw bytes of the byte-level vocabulary), then the pair with the lowest merge rank is
/// merged repeatedly, leftmost first on ties, exactly as the Hugging Face implementation
/// (tokenizers/src/models/bpe/word.rs) does.
class Bpe {
public:
    /// The gap a vocabulary's ids may leave beyond twice its size (the id tables are dense).
    static constexpr std::size_t kIdSlack = 65536;

    /// vocab: (token, id) pairs; merges: pairs of tokens in rank order. With byte_of (byte
    /// mode, for a pre-tokenizer that ends with ByteLevel), words are raw bytes and each token
    /// made of byte-level characters is keyed by the bytes it stands for; byte_of maps a
    /// byte-level character to its byte, or -1.
    template <class ByteOf = std::nullptr_t>
    Bpe(const std::vector<std::pair<std::string, std::int64_t>>& vocab,
        const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options, ByteOf byte_of = nullptr)
        : options_(std::move(options)) {
        constexpr bool bytes = !std::is_same_v<ByteOf, std::nullptr_t>;
        byte_mode_ = bytes;
        if constexpr (bytes) byte_of_ = [byte_of](char32_t c) { return byte_of(c); };
        std::int64_t max_id = -1;
        const std::string* max_tok = nullptr;
        for (const auto& [tok, id] : vocab) {
            check<FormatError>(id >= 0 && id < (std::int64_t{1} << 28), "[tokenizer.json model.vocab] token '", tok,
                               "' has id ", id, ", expected 0 <= id < 2^28");
            if (id > max_id) {
                max_id = id;
                max_tok = &tok;
            }
        }
        // The id table is dense: one id far past the others (a 41 KB file with an id of 2^28 - 1)
        // made it gigabytes. A tokenizer's ids run 0 .. N-1, with room here for gaps.
        check<FormatError>(max_id < static_cast<std::int64_t>(kIdSlack + 2 * vocab.size()), "[tokenizer.json model.vocab] token '",
                           max_tok ? *max_tok : std::string(), "' has id ", max_id, " among ", vocab.size(),
                           " tokens: ids must run from 0 with few gaps (the largest allowed here is ",
                           kIdSlack + 2 * vocab.size() - 1, ")");
        id_to_token_.assign(static_cast<std::size_t>(max_id + 1), std::string{});
        has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
        keys_.reserve(vocab.size());
        std::string key;
        for (const auto& [tok, id64] : vocab) {
            const auto id = static_cast<TokenId>(id64);
            id_to_token_[static_cast<std::size_t>(id)] = tok;
            has_id_[static_cast<std::size_t>(id)] = true;
            if constexpr (bytes) {
                if (to_bytes(tok, byte_of, key)) keys_[key] = id;
                else other_[tok] = id;
            } else {
                keys_[tok] = id;
            }
        }
        merges_.reserve(merges.size());
        const std::string_view prefix = options_.continuing_subword_prefix;
        std::string merged;
        for (std::size_t r = 0; r < merges.size(); ++r) {
            const auto& [a, b] = merges[r];
            const auto ia = token_to_id(a), ib = token_to_id(b);
            check<FormatError>(ia && ib, "[tokenizer.json model.merges] merge ", r, " ('", a, "' '", b,
                               "') uses a token that is not in the vocabulary");
            // The merged token is a + b without b's continuing-subword prefix.
            const std::string_view bv = b;
            merged.assign(a).append(bv.substr(0, prefix.size()) == prefix ? bv.substr(prefix.size()) : bv);
            const auto im = token_to_id(merged);
            check<FormatError>(im.has_value(), "[tokenizer.json model.merges] merge ", r, " gives '", merged,
                               "', which is not in the vocabulary");
            merges_.insert(*ia, *ib, {static_cast<std::int32_t>(r), *im});
        }
        if (options_.unk_token) unk_id_ = token_to_id(*options_.unk_token).value_or(-1);
        if (options_.byte_fallback) {
            for (int b = 0; b < 256; ++b) {
                static const char* hex = "0123456789ABCDEF";
                const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
                byte_tokens_[b] = token_to_id(name).value_or(-1);
            }
        }
    }

    bool byte_mode() const noexcept { return byte_mode_; }
    std::size_t vocab_size() const noexcept { return keys_.size() + other_.size(); }
    /// One more than the largest id in the vocabulary.
    std::size_t id_bound() const noexcept { return id_to_token_.size(); }
    std::size_t merge_count() const noexcept { return merges_.size(); }

    std::optional<TokenId> token_to_id(std::string_view token) const {
        if (byte_mode_) {
            thread_local std::string key;
            if (to_bytes(token, byte_of_, key)) {
                const auto it = keys_.find(key);
                return it == keys_.end() ? std::nullopt : std::optional<TokenId>(it->second);
            }
            const auto it = other_.find(token);
            return it == other_.end() ? std::nullopt : std::optional<TokenId>(it->second);
        }
        const auto it = keys_.find(token);
        return it == keys_.end() ? std::nullopt : std::optional<TokenId>(it->second);
    }
    const std::string* id_to_token(TokenId id) const noexcept {
        if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<std::size_t>(id)]) return nullptr;
        return &id_to_token_[static_cast<std::size_t>(id)];
    }

    /// Tokenizes one word (a pre-tokenized split) and appends its tokens to out.
    void tokenize(std::string_view word, std::vector<WordToken>& out) const {
        if (word.empty()) return;
        const detail::StringIdMap& keys = keys_;
        if (whole_word(word, keys, out)) return;
        {
            std::unique_lock lock(cache_->mutex, std::try_to_lock);
            if (lock.owns_lock()) {
                const auto it = cache_->words.find(word);
                if (it != cache_->words.end()) {
                    out.insert(out.end(), it->second.begin(), it->second.end());
                    return;
                }
            }
        }
        const std::size_t first = out.size();
        merge_word(word, keys, out);
        if (word.size() < kCacheMaxWord) {
            std::unique_lock lock(cache_->mutex, std::try_to_lock);
            if (lock.owns_lock() && cache_->words.size() < kCacheCapacity)
                cache_->words.emplace(std::string(word), std::vector<WordToken>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
        }
    }

    /// Plain twin of tokenize (no cache, no heap): repeatedly merges the adjacent pair with the
    /// lowest rank, leftmost first, in O(n^2) per word. For tests.
    void tokenize_reference(std::string_view word, std::vector<WordToken>& out) const {
        if (word.empty()) return;
        const detail::StringIdMap& keys = keys_;
        if (whole_word(word, keys, out)) return;
        std::vector<Symbol> syms;
        initial_symbols(word, keys, syms);
        while (true) {
            std::size_t best = syms.size();
            const detail::PairTable::Value* best_merge = nullptr;
            for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
                const auto* m = merges_.find(syms[i].id, syms[i + 1].id);
                if (m != nullptr && (best_merge == nullptr || m->rank < best_merge->rank)) best = i, best_merge = m;
            }
            if (best_merge == nullptr) break;
            syms[best].id = best_merge->id;
            syms[best].len += syms[best + 1].len;
            syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        }
        emit(syms, out);
    }

    /// Drops the word cache (for benchmarks that want cold runs).
    void clear_cache() const {
        std::lock_guard lock(cache_->mutex);
        cache_->words.clear();
    }

private:
    static constexpr std::size_t kCacheCapacity = 100000;  // words
    static constexpr std::size_t kCacheMaxWord = 256;      // bytes

    struct Symbol {
        TokenId id;
        std::int32_t prev, next;
        std::uint32_t begin, len;
    };
    struct Candidate {
        std::int32_t rank, pos;
        TokenId id;
        // Lowest rank first, then leftmost.
        bool operator<(const Candidate& o) const noexcept { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };

    /// With ignore_merges, a word that is itself in the vocabulary is one token.
    bool whole_word(std::string_view word, const detail::StringIdMap& keys, std::vector<WordToken>& out) const {
        if (!options_.ignore_merges) return false;
        const auto it = keys.find(word);
        if (it == keys.end()) return false;
        out.push_back({it->second, 0, static_cast<std::uint32_t>(word.size())});
        return true;
    }

    void add_symbol(std::vector<Symbol>& syms, TokenId id, std::uint32_t begin, std::uint32_t len) const {
        const auto n = static_cast<std::int32_t>(syms.size());
        if (n > 0) syms.back().next = n;
        syms.push_back({id, n - 1, -1, begin, len});
    }

    /// The characters (or bytes) of a word as initial symbols: vocabulary hits, byte-fallback
    /// tokens, or unknown tokens (fused when fuse_unk); unknown characters without an unknown
    /// token are dropped, as in the reference.
    void initial_symbols(std::string_view word, const detail::StringIdMap& keys, std::vector<Symbol>& syms) const {
        syms.clear();
        bool unk = false;  // pending unknown characters: (unk_begin, unk_len)
        std::uint32_t unk_begin = 0, unk_len = 0;
        std::string piece;
        std::size_t pos = 0;
        while (pos < word.size()) {
            const std::size_t b = pos;
            if (byte_mode_) ++pos;
            else pos += std::min(utf8_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
            const auto begin = static_cast<std::uint32_t>(b), len = static_cast<std::uint32_t>(pos - b);
            std::string_view s = word.substr(b, pos - b);
            const bool decorate = (b > 0 && !options_.continuing_subword_prefix.empty()) ||
                                  (pos == word.size() && !options_.end_of_word_suffix.empty());
            if (decorate) {
                piece.clear();
                if (b > 0) piece += options_.continuing_subword_prefix;
                piece += s;
                if (pos == word.size()) piece += options_.end_of_word_suffix;
                s = piece;
            }
            const auto it = keys.find(s);
            if (it != keys.end()) {
                if (unk) add_symbol(syms, unk_id_, unk_begin, unk_len), unk = false;
                add_symbol(syms, it->second, begin, len);
                continue;
            }
            if (options_.byte_fallback) {
                bool all = true;
                for (const char c : s) all &= byte_tokens_[static_cast<unsigned char>(c)] >= 0;
                if (all) {
                    // Each byte of the (decorated) piece becomes a <0xXX> token of length 1.
                    for (const char c : s) add_symbol(syms, byte_tokens_[static_cast<unsigned char>(c)], begin, 1);
                    continue;
                }
            }
            if (unk_id_ >= 0) {
                if (unk && options_.fuse_unk) {
                    unk_len += len;
                } else {
                    if (unk) add_symbol(syms, unk_id_, unk_begin, unk_len);
                    unk = true, unk_begin = begin, unk_len = len;
                }
            }
            // Without an unknown token the character is dropped, as in the reference.
        }
        if (unk) add_symbol(syms, unk_id_, unk_begin, unk_len);
    }

    /// Offsets are running sums of the symbol lengths, as in the reference: a dropped unknown
    /// character shifts the offsets of what follows.
    static void emit(const std::vector<Symbol>& syms, std::vector<WordToken>& out) {
        std::uint32_t at = 0;
        for (const Symbol& s : syms)
            if (s.len != 0) out.push_back({s.id, at, at + s.len}), at += s.len;
    }

    void merge_word(std::string_view word, const detail::StringIdMap& keys, std::vector<WordToken>& out) const {
        thread_local std::vector<Symbol> syms;
        initial_symbols(word, keys, syms);
        std::priority_queue<Candidate> queue;
        for (std::size_t i = 0; i + 1 < syms.size(); ++i)
            if (const auto* m = merges_.find(syms[i].id, syms[i + 1].id))
                queue.push({m->rank, static_cast<std::int32_t>(i), m->id});
        while (!queue.empty()) {
            const Candidate top = queue.top();
            queue.pop();
            Symbol& cur = syms[static_cast<std::size_t>(top.pos)];
            if (cur.len == 0 || cur.next < 0) continue;  // merged away, or now last
            Symbol& right = syms[static_cast<std::size_t>(cur.next)];
            const auto* m = merges_.find(cur.id, right.id);
            if (m == nullptr || m->id != top.id) continue;  // stale: a neighbour changed
            cur.id = top.id;
            cur.len += right.len;
            cur.next = right.next;
            right.len = 0;
            if (cur.next >= 0) syms[static_cast<std::size_t>(cur.next)].prev = top.pos;
            if (cur.prev >= 0) {
                const Symbol& p = syms[static_cast<std::size_t>(cur.prev)];
                if (const auto* pm = merges_.find(p.id, cur.id)) queue.push({pm->rank, cur.prev, pm->id});
            }
            if (cur.next >= 0) {
                const Symbol& n = syms[static_cast<std::size_t>(cur.next)];
                if (const auto* nm = merges_.find(cur.id, n.id)) queue.push({nm->rank, top.pos, nm->id});
            }
        }
        emit(syms, out);
    }

    /// Spells a byte-level token as the bytes it stands for; false if a character is not in
    /// the byte-level alphabet.
    template <class ByteOf>
    static bool to_bytes(std::string_view token, const ByteOf& byte_of, std::string& out) {
        out.clear();
        std::size_t pos = 0;
        while (pos < token.size()) {
            const int b = byte_of(decode_utf8(token, pos));
            if (b < 0) return false;
            out.push_back(static_cast<char>(b));
        }
        return true;
    }

    detail::StringIdMap keys_;   // token (raw bytes in byte mode) -> id
    detail::StringIdMap other_;  // byte mode: tokens that are not byte-level text
    std::function<int(char32_t)> byte_of_;
    std::vector<std::string> id_to_token_;
    std::vector<bool> has_id_;
    detail::PairTable merges_;
    BpeOptions options_;
    TokenId unk_id_ = -1;
    TokenId byte_tokens_[256] = {};
    bool byte_mode_ = false;

    // Word cache, shared by copies of the model; a busy lock skips the cache instead of waiting.
    struct Cache {
        std::mutex mutex;
        std::unordered_map<std::string, std::vector<WordToken>, detail::StringHash, std::equal_to<>> words;
    };
    std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

}  // namespace hylens::text
