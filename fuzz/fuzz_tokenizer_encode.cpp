// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for hylens::Tokenizer: encodes arbitrary bytes (invalid UTF-8 included)
// with two small tokenizers that use every normalizer, pre-tokenizer and added-token flag the
// library supports, checks the offset invariants and decodes the ids back; with the first byte
// odd-even switch, the input is also read as a tokenizer.json, which must load or throw
// hylens::Error, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hylens/text/chat.hpp"
#include "hylens/text/tokenizer.hpp"

namespace {

// Byte-level BPE over the 256 byte characters plus a few merges, NFC, a Split regex with a
// look-ahead, and added tokens with lstrip / rstrip / single_word / normalized.
std::string byte_level_json() {
    std::string vocab, merges = R"(["Ġ t","Ġt h","a b","ab c","Ã ©"])";
    const auto& table = hylens::text::byte_level_alphabet();
    for (int b = 0; b < 256; ++b) {
        std::string c;
        hylens::text::append_utf8(c, table.to_char[static_cast<std::size_t>(b)]);
        if (c == "\"" || c == "\\") c = "\\" + c;
        vocab += (b ? "," : "") + std::string("\"") + c + "\":" + std::to_string(b);
    }
    vocab += R"(,"Ġt":256,"Ġth":257,"ab":258,"abc":259,"Ã©":260)";
    return R"({"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Strip","strip_left":false,"strip_right":true}]},
"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},
 {"type":"Split","pattern":{"Regex":"(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},
 {"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},
"post_processor":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true},
"decoder":{"type":"ByteLevel"},
"added_tokens":[{"id":261,"content":"<|s|>","special":true,"lstrip":true,"rstrip":true,"normalized":false,"single_word":false},
 {"id":262,"content":"word","special":false,"lstrip":false,"rstrip":false,"normalized":true,"single_word":true}],
"model":{"type":"BPE","vocab":{)" + vocab + R"(},"merges":)" + merges + "}}";
}

// SentencePiece-style BPE: Metaspace, byte fallback, unknown token, TemplateProcessing.
std::string metaspace_json() {
    std::string vocab = R"("<unk>":0,"<s>":1,"▁":2,"a":3,"b":4,"▁a":5,"▁ab":6)";
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) vocab += std::string(",\"<0x") + hex[b >> 4] + hex[b & 15] + ">\":" + std::to_string(7 + b);
    return R"({"normalizer":{"type":"Replace","pattern":{"String":"\t"},"content":" "},
"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},
"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
 "special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},
"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
"added_tokens":[{"id":1,"content":"<s>","special":true,"lstrip":false,"rstrip":false,"normalized":false,"single_word":false}],
"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":true,"vocab":{)" + vocab +
           R"(},"merges":[["▁","a"],["▁a","b"]]}})";
}

const hylens::Tokenizer& tokenizer(int which) {
    static const hylens::Tokenizer a = hylens::Tokenizer::from_string(byte_level_json());
    static const hylens::Tokenizer b = hylens::Tokenizer::from_string(metaspace_json());
    return which == 0 ? a : b;
}

void check_encoding(const hylens::Tokenizer& tok, std::string_view text, bool add_special) {
    const auto enc = tok.encode(text, {.add_special = add_special});
    const std::size_t chars = hylens::text::count_chars(hylens::text::repair_utf8(text));
    if (enc.ids.size() != enc.offsets.size()) std::abort();
    for (std::size_t i = 0; i < enc.size(); ++i) {
        if (enc.offsets[i].begin > enc.offsets[i].end || enc.offsets[i].end > chars) std::abort();
        if (enc.ids[i] < 0 || static_cast<std::size_t>(enc.ids[i]) >= tok.vocab_size()) std::abort();
    }
    const std::string back = tok.decode(enc.ids, false);
    if (!hylens::text::is_valid_utf8(back)) std::abort();
    (void)hylens::span_to_positions(enc, {chars / 3, chars / 2});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    const int mode = data[0] % 4;
    if (mode < 2) {
        check_encoding(tokenizer(mode), text, (data[0] & 4) != 0);
        (void)tokenizer(mode).decode({static_cast<std::int32_t>(data[0]) * 7, -1, 1 << 30});
    } else if (mode == 2) {
        const auto p = hylens::wrap_chat(hylens::ChatFamily::qwen35, text, "**");
        check_encoding(tokenizer(0), p.text, false);
    } else {
        try {
            const auto tok = hylens::Tokenizer::from_string(text);
            check_encoding(tok, "Hello wörld 123 <|s|>", true);
        } catch (const hylens::Error&) {
        }
    }
    return 0;
}
