// ModelJudge: a hylens model answers the rubric question, wrapped in its chat format, greedily;
// the answer is read with the yes/no parser. Run on a golden Qwen3.5 model with the byte-level
// test tokenizer of the study tests (its answers are noise; the protocol is what is checked).

#include <hylens/models/load.hpp>
#include <hylens/stack/generate.hpp>
#include <hylens/tasks/judge.hpp>
#include <hylens/tasks/persona.hpp>
#include <hylens/tasks/registry.hpp>

#include "experiments/fixtures.hpp"
#include "support/tokenizer_without.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace hylens;
using namespace hylens::tasks;

TEST_CASE("judge: ModelJudge answers with the judge model's greedy reply to the chat-wrapped question") {
    const AnyModel model = load(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
    const Tokenizer& tok = test::tiny_tokenizer();
    const std::string question = persona_judge_question("pirate", "Arr, matey!\nmore text");
    CHECK(question == "Here is a reply to a question: \"Arr, matey!\"\nDoes this reply sound like it was written by a pirate? "
                      "Answer yes or no.");
    // The protocol by hand: one user turn in the Qwen3.5 format, 6 greedy tokens.
    const Encoding enc = encode_chat(tok, wrap_chat(ChatFamily::qwen35, question));
    const std::vector<std::int64_t> prompt(enc.ids.begin(), enc.ids.end());
    std::vector<std::int64_t> out;
    model.visit([&](const auto& m) {
        auto cache = m.new_cache();
        GenerateOptions opt;
        opt.max_new = 6;
        out = generate(m, cache, TokenBatch(prompt), opt).ids.at(0);
    });
    REQUIRE(out.size() == 6);
    const auto text_of = [&](std::vector<std::int64_t> ids) {
        return tok.decode(std::vector<Tokenizer::TokenId>(ids.begin(), ids.end()), true);
    };

    ModelJudge judge(model, tok, ChatFamily::qwen35, 6);
    const bool yes = judge.yes(question);
    CHECK(judge.last_answer() == text_of(out));
    CHECK(yes == (parse_yes_no(judge.last_answer()) == YesNo::yes));
    CHECK(judge.yes(question) == yes);  // greedy: the same answer again

    // Generation stops at a stop id (which is kept, then decoded like the rest).
    ModelJudge stopping(model, tok, ChatFamily::qwen35, 6, {out[0]});
    stopping.yes(question);
    CHECK(stopping.last_answer() == text_of({out[0]}));

    // The persona scorer takes the judge's answer as its score and records the rubric beside it.
    Item item;
    item.task = "persona";
    item.context = "A";
    item.alt_context = "B";
    item.expected = {"x"};
    item.alt_expected = {"y"};
    item.fields = {{"persona", "pirate"}, {"alt_persona", "chef"}};
    const Score s = find_task("persona").score(item, "Arr, matey!", ScoreContext{}, &judge);
    CHECK(s.fields["judge"] == yes);
    CHECK(s.fields["rubric"] == true);
    CHECK(s.score == (yes ? 1.0 : 0.0));

    CHECK_THROWS_AS(ModelJudge(model, tok, ChatFamily::qwen35, 0), Error);
    // A judge tokenizer without its chat format's tokens is refused when the judge is made, and
    // the message says it is the judge's (the study's own tokenizer gives the same text).
    const Tokenizer without = Tokenizer::from_string(test::tokenizer_text_without(test::tiny_tokenizer_json(), "<think>"));
    CHECK_THROWS_WITH_AS(ModelJudge(model, without, ChatFamily::qwen35, 6),
                         doctest::Contains("[chat] the judge's tokenizer has no token '<think>'"), FormatError);
}
