// Paper A's dictionary-lookup generators (tasks/lookup/): vocabularies and their filters, the
// templates, clean/corrupted and donor/host pairs with every assertion of §A.4.4-A.4.5
// re-checked here independently of the generator, positions from character offsets, the
// K_fit / K_test split, determinism, alignment across two tokenizers.
// Tokenizers: the Qwen3 and Llama 3 fixtures of tests/data/tokenizer (real tokenizer.json).

#include <hylens/tasks/lookup/align.hpp>
#include <hylens/tasks/lookup/pairs.hpp>
#include <hylens/tasks/lookup/prompt.hpp>
#include <hylens/tasks/lookup/vocabulary.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "text/fixtures.hpp"

using namespace hylens;
using namespace hylens::tasks::lookup;

namespace {

const Tokenizer& qwen() { return test::fixture_tokenizer("qwen3"); }
const Tokenizer& llama() { return test::fixture_tokenizer("llama3"); }

std::string substr_chars(const std::string& s, CharSpan span) {  // the prompts are ASCII
    for (unsigned char c : s) REQUIRE(c < 0x80);
    return s.substr(span.begin, span.end - span.begin);
}

std::string decode_at(const Tokenizer& tok, const std::vector<std::int64_t>& ids, const std::vector<std::size_t>& pos) {
    std::vector<Tokenizer::TokenId> t;
    for (std::size_t p : pos) t.push_back(static_cast<Tokenizer::TokenId>(ids[p]));
    return tok.decode(t);
}

// The invariants of §A.4.4, checked from the texts and a fresh encoding.
void check_clean_corrupt(const Tokenizer& tok, const CleanCorruptItem& it, std::size_t n_pairs) {
    const Encoding c = tok.encode(it.clean_text.text), x = tok.encode(it.corrupt_text.text);
    REQUIRE(c.size() == x.size());
    CHECK(it.clean.ids == std::vector<std::int64_t>(c.ids.begin(), c.ids.end()));
    CHECK(it.corrupt_ids == std::vector<std::int64_t>(x.ids.begin(), x.ids.end()));
    // the corrupted dictionary exchanges the values of t and d, nothing else
    CHECK(substr_chars(it.corrupt_text.text, it.corrupt_text.value(it.target)) == it.dict.values[it.distractor]);
    CHECK(substr_chars(it.corrupt_text.text, it.corrupt_text.value(it.distractor)) == it.dict.values[it.target]);
    std::size_t n_diff = 0;
    const std::vector<std::size_t> et = span_to_positions(c, it.clean_text.entry(it.target));
    const std::vector<std::size_t> ed = span_to_positions(c, it.clean_text.entry(it.distractor));
    for (std::size_t i = 0; i < c.size(); ++i)
        if (c.ids[i] != x.ids[i]) {
            ++n_diff;
            CHECK((std::count(et.begin(), et.end(), i) + std::count(ed.begin(), ed.end(), i)) == 1);
        }
    CHECK(n_diff >= 2);  // both values changed
    // single-token values and answers; the answer is the bare word after "**"
    REQUIRE(it.clean.values.size() == n_pairs);
    for (std::size_t i = 0; i < n_pairs; ++i) {
        REQUIRE(it.clean.values[i].size() == 1);
        CHECK(tok.decode({static_cast<Tokenizer::TokenId>(it.value_ids[i])}) == it.dict.values[i]);
        CHECK(tok.encode_ids(it.dict.values[i]).size() == 1);
    }
    CHECK(tok.decode({static_cast<Tokenizer::TokenId>(it.answer)}) == it.dict.values[it.target]);
    CHECK(tok.decode({static_cast<Tokenizer::TokenId>(it.corrupt_answer)}) == it.dict.values[it.distractor]);
    CHECK(it.clean.final + 1 == c.size());
    // positions: each entry's tokens contain its key and value; qstart opens the question
    for (std::size_t i = 0; i < n_pairs; ++i) {
        const std::string e = decode_at(tok, it.clean.ids, it.clean.entries[i]);
        CHECK(e.find(it.dict.keys[i]) != std::string::npos);
        CHECK(e.find(it.dict.values[i]) != std::string::npos);
        CHECK(decode_at(tok, it.clean.ids, it.clean.values[i]).find(it.dict.values[i]) != std::string::npos);
    }
    const std::string q = decode_at(tok, it.clean.ids, {it.clean.qstart});
    CHECK((q.find('\n') != std::string::npos || q.find("Which") != std::string::npos));
    // the question starts after the last entry's first token (its final token may also hold the
    // question's "\n", as Qwen's ".\n" does)
    CHECK(it.clean.qstart > it.clean.entries.back().front());
    CHECK(it.clean.qstart >= it.clean.entries.back().back());
}

}  // namespace

TEST_SUITE("circuit/lookup") {

TEST_CASE("vocabularies: the lists of §A.4.1 and the per-tokenizer single-token filters") {
    CHECK(in_family_keys.size() == 22);
    CHECK(in_family_values.size() == 20);
    CHECK(cross_family_keys.size() == 167);
    CHECK(cross_family_values.size() == 30);
    CHECK(std::count(cross_family_values.begin(), cross_family_values.end(), "olive") == 0);
    for (const Tokenizer* tok : {&qwen(), &llama()}) {
        const Vocabulary v = in_family_vocabulary(*tok);
        CHECK(v.values.size() >= 10);
        for (const std::string& w : v.values) {
            CHECK(tok->encode_ids(w).size() == 1);
            CHECK(tok->encode_ids(" " + w).size() == 1);
        }
        for (const std::string& w : v.keys) CHECK(tok->encode_ids(" " + w).size() == 1);
        // every word the filter dropped fails the rule it was dropped by
        for (std::string_view w : in_family_values)
            if (std::find(v.values.begin(), v.values.end(), w) == v.values.end())
                CHECK((tok->encode_ids(std::string(w)).size() != 1 || tok->encode_ids(" " + std::string(w)).size() != 1));
    }
    const Vocabulary x = cross_family_vocabulary({&qwen(), &llama()});
    CHECK(x.keys.size() >= 100);
    for (const std::string& w : x.keys)
        for (const Tokenizer* tok : {&qwen(), &llama()}) {
            CHECK(tok->encode_ids(w).size() == 1);
            CHECK(tok->encode_ids(" " + w).size() == 1);
        }
    // keys that are values are dropped, multi-token words are dropped
    constexpr std::array<std::string_view, 3> keys = {"apple", "red", "zxqvbnmlkjh"};
    constexpr std::array<std::string_view, 2> values = {"red", "blue"};
    const Vocabulary f = filter_vocabulary(keys, values, {&qwen()}, true);
    CHECK(f.keys == std::vector<std::string>{"apple"});
    CHECK(f.values == std::vector<std::string>{"red", "blue"});
}

TEST_CASE("key split: disjoint halves of the keys, the same for a seed, another for another seed") {
    const Vocabulary x = cross_family_vocabulary({&qwen(), &llama()});
    const KeySplit a = key_split(x.keys, 0), b = key_split(x.keys, 0), c = key_split(x.keys, 1);
    CHECK(a.fit == b.fit);
    CHECK(a.test == b.test);
    CHECK(a.fit != c.fit);
    CHECK(a.fit.size() == x.keys.size() / 2);
    CHECK(a.fit.size() + a.test.size() == x.keys.size());
    std::set<std::string> all(a.fit.begin(), a.fit.end());
    for (const std::string& k : a.test) CHECK(all.insert(k).second);
    CHECK(all == std::set<std::string>(x.keys.begin(), x.keys.end()));
}

TEST_CASE("templates: chat, list, rev and long render the texts of §A.4.3 with spans on their parts") {
    const ChatFormat qf = chat_format(ChatFamily::qwen35);
    const std::vector<std::string> k = {"apple", "fig", "pear"}, v = {"red", "blue", "gold"};
    const std::string pre = "<|im_start|>user\n", post = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    const LookupText chat = render(qf, Style::chat, k, v, 1);
    CHECK(chat.text == pre + "Dictionary: apple=red, fig=blue, pear=gold.\nQuestion: What is the value of fig?" + post +
                           "The value of fig is **");
    CHECK(substr_chars(chat.text, chat.entry(0)) == " apple=red,");
    CHECK(substr_chars(chat.text, chat.entry(2)) == " pear=gold.");
    CHECK(substr_chars(chat.text, chat.key(1)) == "fig");
    CHECK(substr_chars(chat.text, chat.value(2)) == "gold");
    CHECK(substr_chars(chat.text, chat.span("question")) == "\nQuestion: What is the value of fig?");
    CHECK(substr_chars(chat.text, chat.span("prefill")) == "The value of fig is **");
    CHECK(substr_chars(chat.text, chat.span("prefill_key")) == "fig");
    const LookupText list = render(qf, Style::list, k, v, 2);
    CHECK(list.text == pre + "Lookup table:\n* apple=red\n* fig=blue\n* pear=gold\nWhich value does pear map to?" + post +
                           "The entry pear maps to **");
    CHECK(substr_chars(list.text, list.entry(1)) == "* fig=blue\n");
    CHECK(substr_chars(list.text, list.span("question")) == "Which value does pear map to?");
    const LookupText rev = render(qf, Style::rev, k, v, 0);
    CHECK(rev.text == pre + "Dictionary: red is the value of apple, blue is the value of fig, gold is the value of pear." +
                          "\nQuestion: What is the value of apple?" + post + "The value of apple is **");
    CHECK(substr_chars(rev.text, rev.entry(1)) == " blue is the value of fig");
    CHECK(substr_chars(rev.text, rev.value(1)) == "blue");
    const LookupText lng = render(qf, Style::chat, k, v, 0, "\nSome filler text.\n");
    CHECK(lng.text == pre + "Dictionary: apple=red, fig=blue, pear=gold.\nSome filler text.\n\nQuestion: What is the value of apple?" +
                          post + "The value of apple is **");
    CHECK(substr_chars(lng.text, lng.span("filler")) == "\nSome filler text.\n");
    // another family's wrapper: the same user text between its prefix and suffix
    const LookupText g = render(chat_format(ChatFamily::granite4), Style::chat, k, v, 1);
    CHECK(substr_chars(g.text, g.span("user")) == substr_chars(chat.text, chat.span("user")));
    CHECK(substr_chars(g.text, g.entry(1)) == " fig=blue,");
    // the prompt carries its format's special-token strings; a tokenizer without them is refused
    // (it spelled "<|start_of_role|>" as ordinary tokens)
    CHECK(g.specials == std::vector<std::string>{"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"});
    CHECK(chat.specials == std::vector<std::string>{"<|im_start|>", "<|im_end|>", "<think>", "</think>"});
    REQUIRE(!qwen().token_to_id("<|start_of_role|>").has_value());
    CHECK_THROWS_WITH_AS(tokenize(qwen(), g, 3), doctest::Contains("the tokenizer has no token '<|start_of_role|>'"), FormatError);
    CHECK(tokenize(qwen(), chat, 3).ids.front() == *qwen().token_to_id("<|im_start|>"));
    // filler_text: the corpus' first n tokens, trimmed and wrapped in newlines
    const std::string f = filler_text(qwen(), "The quick brown fox jumps over the lazy dog again and again.  ", 5);
    CHECK(f.front() == '\n');
    CHECK(f.back() == '\n');
    CHECK(qwen().encode_ids(f.substr(1, f.size() - 2)).size() == 5);
    CHECK_THROWS_AS(filler_text(qwen(), "two words", 50), ShapeError);
    CHECK_THROWS_AS(render(qf, Style::chat, k, v, 3), ShapeError);
    CHECK_THROWS_AS(render(qf, Style::chat, k, {"red"}, 0), ShapeError);
    CHECK_THROWS_AS(parse_variant("chat9"), ShapeError);
    for (const char* n : {"chat4", "chat8", "chat16", "list8", "rev8", "long", "perm8"}) CHECK(parse_variant(n).name() == n);
}

TEST_CASE("clean/corrupted pairs: every assertion of §A.4.4 holds for every variant, deterministically") {
    const std::string corpus =
        "The history of the valley begins with the river, which carved a wide plain over many thousands of years. "
        "Farmers settled along its banks and built small villages of stone and timber, trading grain and wool with "
        "the towns downstream. In the spring the water rose and flooded the lower fields.";
    for (const char* name : {"chat4", "chat8", "chat16", "list8", "rev8", "long", "perm8"}) {
        INFO(name);
        const Variant var = parse_variant(name);
        const Vocabulary voc = in_family_vocabulary(qwen());
        const std::string filler = var.long_filler ? filler_text(qwen(), corpus, 40) : "";
        const CleanCorruptSet s = clean_corrupt_pairs(qwen(), chat_format(ChatFamily::qwen35), var, voc, 6, 0, filler);
        const std::size_t configs = var.perm ? 8 : 4;
        CHECK(s.drawn == configs * 6);
        CHECK(s.items.size() + s.dropped.total() == s.drawn);
        CHECK(s.items.size() >= s.drawn * 3 / 4);
        for (const CleanCorruptItem& it : s.items) check_clean_corrupt(qwen(), it, var.n_pairs);
        if (!var.perm) {
            const auto cfg = standard_configs(var.n_pairs);
            for (const CleanCorruptItem& it : s.items) {
                CHECK(it.target == cfg[it.index / 6].first);
                CHECK(it.distractor == cfg[it.index / 6].second);
            }
        } else {
            std::set<std::size_t> targets;
            for (const CleanCorruptItem& it : s.items) {
                targets.insert(it.target);
                CHECK(it.distractor != it.target);
            }
            CHECK(targets.size() >= 6);
        }
        // the same seed gives the same items; another seed other dictionaries
        const CleanCorruptSet again = clean_corrupt_pairs(qwen(), chat_format(ChatFamily::qwen35), var, voc, 6, 0, filler);
        const CleanCorruptSet other = clean_corrupt_pairs(qwen(), chat_format(ChatFamily::qwen35), var, voc, 6, 1, filler);
        REQUIRE(again.items.size() == s.items.size());
        for (std::size_t i = 0; i < s.items.size(); ++i) CHECK(again.items[i].clean.ids == s.items[i].clean.ids);
        CHECK(other.items.front().dict.keys != s.items.front().dict.keys);
    }
}

TEST_CASE("donor/host pairs: one dictionary, prompts differ only in the queried key, equal positions") {
    const Vocabulary voc = in_family_vocabulary(qwen());
    for (Style st : {Style::chat, Style::list, Style::rev}) {
        const DonorHostSet s = donor_host_pairs(qwen(), chat_format(ChatFamily::qwen35), st, voc, 5, 3);
        CHECK(s.drawn == 20);
        CHECK(s.items.size() + s.dropped.total() == s.drawn);
        CHECK(s.items.size() >= 15);
        for (const DonorHostItem& it : s.items) {
            const Encoding a = qwen().encode(it.a_text.text), b = qwen().encode(it.b_text.text);
            REQUIRE(a.size() == b.size());
            for (std::size_t i = 0; i < a.size(); ++i)
                if (a.ids[i] != b.ids[i]) CHECK(i >= it.a.qstart);
            CHECK(a.ids != b.ids);
            CHECK(span_to_positions(b, it.b_text.entry(3)) == it.a.entries[3]);
            CHECK(it.answer_a == it.value_ids[it.ia]);
            CHECK(it.answer_b == it.value_ids[it.ib]);
            CHECK(it.answer_a != it.answer_b);
            CHECK(substr_chars(it.a_text.text, it.a_text.span("prefill_key")) == it.dict.keys[it.ia]);
            CHECK(substr_chars(it.b_text.text, it.b_text.span("prefill_key")) == it.dict.keys[it.ib]);
        }
    }
}

TEST_CASE("cross-family: fit and test prompts from K_fit / K_test, aligned across two tokenizers") {
    const Vocabulary x = cross_family_vocabulary({&qwen(), &llama()});
    const KeySplit ks = key_split(x.keys, 0);
    const std::vector<QueryItem> fit = query_items(qwen(), chat_format(ChatFamily::qwen35), Style::chat, {ks.fit, x.values}, 20, 0, "fit");
    const std::vector<QueryItem> test = query_items(qwen(), chat_format(ChatFamily::qwen35), Style::chat, {ks.test, x.values}, 20, 0, "test");
    CHECK(fit.size() == 20);
    for (const QueryItem& it : fit)
        for (const std::string& k : it.dict.keys) CHECK(std::count(ks.fit.begin(), ks.fit.end(), k) == 1);
    for (const QueryItem& it : test)
        for (const std::string& k : it.dict.keys) CHECK(std::count(ks.test.begin(), ks.test.end(), k) == 1);
    // the same dictionary in two families' wrappers, aligned by canonical spans
    const QueryItem& it = fit[0];
    const LookupText a = render(chat_format(ChatFamily::qwen35), Style::chat, it.dict.keys, it.dict.values, it.query);
    const LookupText b = render(chat_format(ChatFamily::granite4), Style::chat, it.dict.keys, it.dict.values, it.query);
    const Encoding ea = qwen().encode(a.text), eb = llama().encode(b.text);
    const auto ca = canonical_spans(ea, {a.span("user"), a.span("prefill")});
    const auto cb = canonical_spans(eb, {b.span("user"), b.span("prefill")});
    const auto pairs = align(ca, cb);
    CHECK(pairs.size() >= ea.size() / 2);
    for (const auto& [i, j] : pairs) {
        CHECK(qwen().decode({ea.ids[i]}) == llama().decode({eb.ids[j]}));
        CHECK(ca[i] == cb[j]);
    }
    // wrapper tokens have no canonical span
    CHECK(!ca[0].has_value());
    // every key (one token after a space in both tokenizers) is aligned
    for (std::size_t e = 0; e < it.dict.keys.size(); ++e) {
        const auto pa = span_to_positions(ea, a.key(e));
        REQUIRE(pa.size() == 1);
        CHECK(std::count_if(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == pa[0]; }) == 1);
    }
}

}  // TEST_SUITE
