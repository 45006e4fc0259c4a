// SPDX-License-Identifier: Apache-2.0
// hylens::Tokenizer: reads a Hugging Face tokenizer.json (byte-level or byte-fallback BPE) and
// encodes and decodes as the Hugging Face tokenizers library does, with character offsets.
#pragma once

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int32_t
#include <filesystem>   // std::filesystem::is_directory
#include <fstream>      // std::ifstream
#include <iterator>     // std::istreambuf_iterator
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/added_vocabulary.hpp"
#include "hylens/text/bpe.hpp"
#include "hylens/text/decoder.hpp"
#include "hylens/text/detail/json.hpp"
#include "hylens/text/encoding.hpp"
#include "hylens/text/normalized_string.hpp"
#include "hylens/text/normalizer.hpp"
#include "hylens/text/post_processor.hpp"
#include "hylens/text/pre_tokenizer.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens {

/// Options of Tokenizer::encode.
struct EncodeOptions {
    /// Add the post-processor's special tokens (e.g. a BOS), as `add_special_tokens=True`.
    bool add_special = false;
};

/// A tokenizer read from a Hugging Face tokenizer.json.
///
/// Supported: the BPE model (merges, byte_fallback, unk/fuse_unk, ignore_merges, subword
/// prefix/suffix); normalizers Sequence, NFC, NFD, NFKC, NFKD, Replace, Prepend, Strip;
/// pre-tokenizers Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, WhitespaceSplit,
/// Whitespace; decoders Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip;
/// post-processors TemplateProcessing, ByteLevel, Sequence; added tokens with their flags.
/// Anything else is rejected with UnsupportedError naming the component.
///
/// encode is const and may be called from several threads at once.
class Tokenizer {
public:
    using TokenId = text::TokenId;

    /// Reads a tokenizer.json file. Throws FormatError (malformed file) or UnsupportedError.
    static Tokenizer from_file(const std::string& path) {
        // A directory opens as a stream whose size reads as 2^63 - 1 (a std::bad_alloc below).
        if (std::filesystem::is_directory(path)) fail<FormatError>("[tokenizer] '", path, "' is a directory, not a tokenizer.json file");
        // A FIFO blocked the read forever.
        if (std::filesystem::exists(path) && !std::filesystem::is_regular_file(path))
            fail<FormatError>("[tokenizer] '", path, "' is not a regular file (a pipe or a device?)");
        std::ifstream in(path, std::ios::binary | std::ios::ate);
        check<FormatError>(in.good(), "[tokenizer] cannot open '", path, "'");
        const auto size = static_cast<std::streamoff>(in.tellg());
        check<FormatError>(size >= 0, "[tokenizer] cannot read '", path, "'");
        std::string text(static_cast<std::size_t>(size), '\0');
        in.seekg(0);
        in.read(text.data(), size);
        check<FormatError>(in.good() || in.eof(), "[tokenizer] cannot read '", path, "'");
        try {
            Tokenizer t = from_string(text);
            t.source_ = std::filesystem::absolute(path).string();  // as read, whatever the working directory later
            return t;
        } catch (const Error& e) {
            fail<FormatError>("[tokenizer ", path, "] ", e.what());
        }
    }

    /// Parses tokenizer.json text.
    static Tokenizer from_string(std::string_view json_text) {
        try {
            const auto parsed = text::detail::parse_tokenizer_json(json_text);
            return Tokenizer(parsed.rest, &parsed);
        } catch (const text::detail::Json::exception& e) {
            fail<FormatError>("[tokenizer.json] not valid JSON: ", e.what());
        }
    }

    /// Builds the tokenizer from a parsed tokenizer.json.
    static Tokenizer from_json(const text::detail::Json& j) {
        try {
            return Tokenizer(j, nullptr);
        } catch (const text::detail::Json::exception& e) {
            fail<FormatError>("[tokenizer.json] unexpected content: ", e.what());
        }
    }

    /// Encodes text. Invalid UTF-8 is first repaired: every maximal invalid subsequence
    /// becomes one U+FFFD (as a browser's TextDecoder does), and offsets count characters of
    /// the repaired text.
    Encoding encode(std::string_view input, EncodeOptions options = {}) const {
        const std::string text = text::repair_utf8(input);
        Encoding enc;
        std::vector<std::string> token_strings;  // only kept when a post-processor reads them
        const bool keep_strings = needs_token_strings_;

        // Byte offset -> character index of the repaired text.
        std::vector<std::uint32_t> char_at(text.size() + 1);
        {
            std::uint32_t c = 0;
            for (std::size_t i = 0; i < text.size(); ++i) {
                char_at[i] = c;
                if (i + 1 < text.size() && text::is_lead_byte(static_cast<unsigned char>(text[i + 1]))) ++c;
            }
            char_at[text.size()] = static_cast<std::uint32_t>(text::count_chars(text));
        }
        const auto to_chars = [&](std::size_t b, std::size_t e) -> CharSpan {
            if (b >= text.size()) return {b, e};  // the reference leaves such offsets as they are
            return {char_at[b], e >= text.size() ? char_at[text.size()] : char_at[e]};
        };
        const auto emit_added = [&](const text::NormalizedString& piece, TokenId id) {
            enc.ids.push_back(id);
            const auto [b, e] = piece.empty() ? std::pair<std::size_t, std::size_t>{piece.original_begin(), piece.original_end()}
                                              : piece.original_range(0, piece.size());
            enc.offsets.push_back(to_chars(b, e));
            if (keep_strings) token_strings.push_back(piece.get());
        };

        thread_local std::vector<text::WordToken> word_tokens;
        for (const auto& m : added_.find(text, /*normalized=*/false)) {
            text::NormalizedString piece(text, m.begin, m.end);
            if (m.id >= 0) {
                emit_added(piece, m.id);
                continue;
            }
            normalizer_.apply(piece);
            std::vector<text::NormalizedString> plain;
            for (const auto& n : added_.find(piece.get(), /*normalized=*/true)) {
                if (n.id < 0) {
                    plain.push_back(piece.slice(n.begin, n.end));
                    continue;
                }
                emit_pending(plain, word_tokens, enc, token_strings, to_chars);
                emit_added(piece.slice(n.begin, n.end), n.id);
            }
            emit_pending(plain, word_tokens, enc, token_strings, to_chars);
        }
        post_processor_.apply(enc, token_strings, options.add_special);
        return enc;
    }

    /// Just the ids of encode(text).
    std::vector<TokenId> encode_ids(std::string_view text, EncodeOptions options = {}) const {
        return encode(text, options).ids;
    }

    /// Decodes ids to text; unknown ids are skipped, as in the reference.
    std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const {
        std::vector<std::string> tokens;
        tokens.reserve(ids.size());
        for (const TokenId id : ids) {
            const std::string* t = id_to_token_ptr(id);
            if (t == nullptr) continue;
            if (skip_special && added_.is_special(*t)) continue;
            tokens.push_back(*t);
        }
        return decoder_.decode(std::move(tokens));
    }

    /// The id of a token string (added tokens first, then the model vocabulary).
    std::optional<TokenId> token_to_id(std::string_view token) const {
        for (const auto& t : added_.tokens())
            if (t.content == token) return t.id;
        return model_.token_to_id(token);
    }

    /// The token string of an id (in the vocabulary's spelling, e.g. "Ġthe"), if it exists.
    std::optional<std::string> id_to_token(TokenId id) const {
        const std::string* t = id_to_token_ptr(id);
        if (t == nullptr) return std::nullopt;
        return *t;
    }

    /// The id of `word` if it encodes to exactly one token (with a space before it when
    /// leading_space is set), without special tokens.
    std::optional<TokenId> single_token_id(std::string_view word, bool leading_space) const {
        std::string s;
        s.reserve(word.size() + 1);
        if (leading_space) s.push_back(' ');
        s.append(word);
        const auto ids = encode_ids(s);
        if (ids.size() != 1) return std::nullopt;
        return ids[0];
    }

    /// True if `word` (after a space when leading_space) is one token.
    bool is_single_token(std::string_view word, bool leading_space) const {
        return single_token_id(word, leading_space).has_value();
    }

    /// Number of ids: the largest id plus one over the model and the added tokens.
    std::size_t vocab_size() const noexcept { return vocab_size_; }
    /// The file it was read from (from_file), or "" (from_string): what a result's run.json names.
    const std::string& source() const noexcept { return source_; }
    const text::AddedVocabulary& added_tokens() const noexcept { return added_; }
    const text::Bpe& model() const noexcept { return model_; }

private:
    /// `j` itself, checked to be an object first: a tokenizer.json of "[]" or "null" said "not
    /// valid JSON: cannot use value() with array" (the members read it before the check).
    static const text::detail::Json& top_level(const text::detail::Json& j) {
        check<FormatError>(j.is_object(), "[tokenizer.json] expected an object at the top level, got ", j.type_name());
        return j;
    }

    /// parsed, when given, holds model.vocab and model.merges (absent from j).
    Tokenizer(const text::detail::Json& j, const text::detail::ParsedTokenizerJson* parsed)
        : normalizer_(text::Normalizer::from_json(top_level(j).value("normalizer", text::detail::Json()))),
          pre_tokenizer_(text::PreTokenizer::from_json(j.value("pre_tokenizer", text::detail::Json()))),
          post_processor_(text::PostProcessor::from_json(j.value("post_processor", text::detail::Json()))),
          decoder_(text::Decoder::from_json(j.value("decoder", text::detail::Json()))),
          model_(read_model(text::detail::require(j, "model", "root"), parsed, pre_tokenizer_.ends_with_byte_level())) {
        needs_token_strings_ = post_processor_.reads_token_strings();
        // Added tokens: the id is the model's id for the same content when it has one (the
        // reference re-derives it that way), otherwise the file's id.
        std::vector<text::AddedToken> added;
        if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
            const auto& list = j["added_tokens"];
            check<FormatError>(list.is_array(), "[tokenizer.json added_tokens] expected an array, got ", list.type_name());
            for (const auto& t : list) {
                text::AddedToken a;
                a.content = text::detail::get_string(t, "content", "added_tokens");
                check<FormatError>(text::is_valid_utf8(a.content), "[tokenizer.json added_tokens] content is not valid UTF-8");
                const auto file_id = text::detail::get_int_or(t, "id", "added_tokens", 0, (1 << 28) - 1, -1);
                const auto model_id = model_.token_to_id(a.content);
                check<FormatError>(model_id || file_id >= 0, "[tokenizer.json added_tokens] token '", a.content, "' has no id");
                a.id = model_id ? *model_id : static_cast<TokenId>(file_id);
                a.single_word = text::detail::get_bool_or(t, "single_word", "added_tokens", false);
                a.lstrip = text::detail::get_bool_or(t, "lstrip", "added_tokens", false);
                a.rstrip = text::detail::get_bool_or(t, "rstrip", "added_tokens", false);
                a.special = text::detail::get_bool_or(t, "special", "added_tokens", false);
                a.normalized = text::detail::get_bool_or(t, "normalized", "added_tokens", !a.special);
                added.push_back(std::move(a));
            }
        }
        added_ = text::AddedVocabulary(std::move(added), normalizer_);
        added_by_id_.clear();
        std::size_t size = model_.id_bound();
        const std::size_t id_limit = text::Bpe::kIdSlack + 2 * (size + added_.tokens().size());
        for (std::size_t i = 0; i < added_.tokens().size(); ++i) {
            const auto id = static_cast<std::size_t>(added_.tokens()[i].id);
            // A dense table, as the model's: an id far past the rest made it gigabytes.
            check<FormatError>(id < id_limit, "[tokenizer.json added_tokens] token '", added_.tokens()[i].content, "' has id ", id,
                               " beside ", size, " vocabulary ids: ids must run on from the vocabulary's with few gaps "
                               "(the largest allowed here is ", id_limit - 1, ")");
            if (added_by_id_.size() <= id) added_by_id_.resize(id + 1, -1);
            added_by_id_[id] = static_cast<std::int32_t>(i);
            size = std::max(size, id + 1);
        }
        vocab_size_ = size;
    }

    static text::Bpe read_model(const text::detail::Json& m, const text::detail::ParsedTokenizerJson* parsed, bool byte_level) {
        const std::string type = text::detail::get_string(m, "type", "model");
        check<UnsupportedError>(type == "BPE", "[tokenizer.json model] unsupported model type '", type, "' (supported: BPE)");
        const auto dropout = m.find("dropout");
        check<UnsupportedError>(dropout == m.end() || dropout->is_null() || (dropout->is_number() && dropout->get<double>() == 0.0),
                                "[tokenizer.json model.dropout] BPE dropout is not supported (it makes encoding random)");
        text::detail::ParsedTokenizerJson from_dom;
        if (parsed == nullptr || !parsed->has_vocab || !parsed->has_merges) {
            // The streaming reader keeps what it took out of the DOM (a vocabulary read there
            // is not in `m`): a missing or malformed merges said "missing field 'vocab'".
            if (parsed != nullptr && parsed->has_vocab) {
                from_dom.vocab = parsed->vocab;
            } else {
                const auto& vocab_json = text::detail::require(m, "vocab", "model");
                check<FormatError>(vocab_json.is_object(), "[tokenizer.json model.vocab] expected an object, got ",
                                   vocab_json.type_name());
                for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
                    check<FormatError>(it.value().is_number_integer(), "[tokenizer.json model.vocab] token '", it.key(),
                                       "' has a non-integer id (", it.value().type_name(), ")");
                    check<FormatError>(!it.value().is_number_unsigned() || it.value().get<std::uint64_t>() < (std::uint64_t{1} << 28),
                                       "[tokenizer.json model.vocab] token '", it.key(), "' has id ", it.value().dump(),
                                       ", expected 0 <= id < 2^28");  // it said "has id -1"
                    from_dom.vocab.emplace_back(it.key(), it.value().get<std::int64_t>());
                }
            }
            if (parsed != nullptr && parsed->has_merges) {
                from_dom.merges = parsed->merges;
            } else {
                const auto& merges_json = text::detail::require(m, "merges", "model");
                check<FormatError>(merges_json.is_array(), "[tokenizer.json model.merges] expected an array, got ",
                                   merges_json.type_name());
                for (const auto& mj : merges_json) {
                    if (mj.is_string()) {
                        from_dom.merges.push_back(text::detail::split_merge(mj.get<std::string>()));
                    } else {
                        check<FormatError>(mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string(),
                                           "[tokenizer.json model.merges] expected \"a b\" or [\"a\", \"b\"], got ", mj.dump());
                        from_dom.merges.emplace_back(mj[0].get<std::string>(), mj[1].get<std::string>());
                    }
                }
            }
            parsed = &from_dom;
        }
        text::BpeOptions o;
        const std::string unk = text::detail::get_string_or(m, "unk_token", "model", "\x01none");
        if (unk != "\x01none") o.unk_token = unk;
        o.continuing_subword_prefix = text::detail::get_string_or(m, "continuing_subword_prefix", "model", "");
        o.end_of_word_suffix = text::detail::get_string_or(m, "end_of_word_suffix", "model", "");
        o.fuse_unk = text::detail::get_bool_or(m, "fuse_unk", "model", false);
        o.byte_fallback = text::detail::get_bool_or(m, "byte_fallback", "model", false);
        o.ignore_merges = text::detail::get_bool_or(m, "ignore_merges", "model", false);
        if (byte_level)
            return text::Bpe(parsed->vocab, parsed->merges, std::move(o),
                             [](char32_t c) { return text::byte_level_alphabet().byte_of(c); });
        return text::Bpe(parsed->vocab, parsed->merges, std::move(o));
    }

    const std::string* id_to_token_ptr(TokenId id) const noexcept {
        if (id >= 0 && static_cast<std::size_t>(id) < added_by_id_.size() && added_by_id_[static_cast<std::size_t>(id)] >= 0)
            return &added_.tokens()[static_cast<std::size_t>(added_by_id_[static_cast<std::size_t>(id)])].content;
        return model_.id_to_token(id);
    }

    /// Pre-tokenizes and BPE-encodes the pending plain pieces, then clears them.
    template <class ToChars>
    void emit_pending(std::vector<text::NormalizedString>& plain, std::vector<text::WordToken>& word_tokens, Encoding& enc,
                      std::vector<std::string>& token_strings, const ToChars& to_chars) const {
        if (plain.empty()) return;
        const bool byte_mode = model_.byte_mode();
        for (const text::NormalizedString& word : pre_tokenizer_.apply(std::move(plain), byte_mode)) {
            word_tokens.clear();
            model_.tokenize(word.get(), word_tokens);
            for (const auto& t : word_tokens) {
                enc.ids.push_back(t.id);
                const std::size_t e = std::min<std::size_t>(t.end, word.size());
                const std::size_t b = std::min<std::size_t>(t.begin, e);
                const auto [ob, oe] = b < e ? word.original_range(b, e) : std::pair<std::size_t, std::size_t>{word.original_begin(), word.original_begin()};
                enc.offsets.push_back(to_chars(ob, oe));
                if (needs_token_strings_) {
                    const std::string* s = model_.id_to_token(t.id);
                    token_strings.push_back(s ? *s : std::string());
                }
            }
        }
        plain.clear();
    }

    text::Normalizer normalizer_;
    text::PreTokenizer pre_tokenizer_;
    text::PostProcessor post_processor_;
    text::Decoder decoder_;
    text::Bpe model_;
    text::AddedVocabulary added_;
    std::vector<std::int32_t> added_by_id_;  // id -> index into added_.tokens(), or -1
    std::size_t vocab_size_ = 0;
    std::string source_;  // the file read by from_file
    bool needs_token_strings_ = true;
};

}  // namespace hylens
