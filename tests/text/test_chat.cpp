// Chat wrapping: the exact formats and the spans of the user message and the prefill.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hylens/text/chat.hpp"
#include "fixtures.hpp"

using namespace hylens;

TEST_SUITE("text/chat") {
    TEST_CASE("Qwen3.5 wrapper of protocols.md A.4.2") {
        const auto p = wrap_chat(ChatFamily::qwen35, "Dictionary: apple=red.", "The value of apple is **");
        CHECK(p.text ==
              "<|im_start|>user\nDictionary: apple=red.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
              "The value of apple is **");
        CHECK(p.user == CharSpan{17, 39});
        CHECK(p.prefill.end == text::count_chars(p.text));
    }

    TEST_CASE("Granite 4.0 writes its default system prompt, Falcon-H1 its BOS unless suppressed") {
        const auto g = wrap_chat(ChatFamily::granite4, "hi");
        CHECK(g.text ==
              "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are "
              "professional, accurate, and safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>hi<|end_of_text|>\n"
              "<|start_of_role|>assistant<|end_of_role|>");
        const auto f = wrap_chat(ChatFamily::falcon_h1, "hi");
        CHECK(f.text == "<|begin_of_text|><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
        const auto nf = wrap_chat(ChatFamily::falcon_h1, "hi", "", {.add_bos = false});
        CHECK(nf.text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
        CHECK(nf.user == CharSpan{17, 19});
    }

    TEST_CASE("encoded chat prompt: special tokens, and the user span maps to its tokens") {
        const auto& tok = hylens::test::fixture_tokenizer("qwen3");
        const auto p = wrap_chat(ChatFamily::qwen35, "Привет, apple=red", "**");
        const auto enc = encode_chat(tok, p);
        CHECK(enc.ids.front() == 151644);  // <|im_start|>
        CHECK(tok.decode(enc.ids) == p.text);
        std::vector<std::int32_t> user_ids;
        for (const auto i : span_to_positions(enc, p.user)) user_ids.push_back(enc.ids[i]);
        CHECK(tok.decode(user_ids) == "Привет, apple=red");
    }

    TEST_CASE("encode_chat refuses a tokenizer without the format's special tokens (they were spelled as text)") {
        const auto p = wrap_chat(ChatFamily::qwen35, "hi");
        CHECK(p.specials == std::vector<std::string>{"<|im_start|>", "<|im_end|>", "<think>", "</think>"});
        // Other text in angle brackets, in an edited system message or the user's text, is text.
        ChatFormat edited = chat_format(ChatFamily::granite4);
        edited.prefix.insert(edited.prefix.find("You are"), "Wrap the answer in <answer></answer> tags. ");
        CHECK(chat_specials(edited) == std::vector<std::string>{"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"});
        // a "<|" that opens no special does not hide the ones after it
        ChatFormat odd = chat_format(ChatFamily::qwen35);
        odd.suffix.insert(0, "Use <| to start a list, <|x as well. ");
        CHECK(chat_specials(odd) == std::vector<std::string>{"<|im_start|>", "<|im_end|>", "<think>", "</think>"});
        CHECK(wrap_chat(ChatFamily::falcon_h1, "hi").specials ==
              std::vector<std::string>{"<|begin_of_text|>", "<|im_start|>", "<|im_end|>"});
        CHECK(wrap_chat(ChatFamily::falcon_h1, "hi", "", {.add_bos = false}).specials ==
              std::vector<std::string>{"<|im_start|>", "<|im_end|>"});
        // A tokenizer with no added tokens (the check comes before any encoding).
        const Tokenizer bare = Tokenizer::from_string(
            R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})");
        CHECK_THROWS_WITH_AS(encode_chat(bare, p),
                             "[chat] the tokenizer has no token '<|im_start|>', which the chat format writes (is it the "
                             "model's tokenizer.json?)",
                             FormatError);
    }
}
