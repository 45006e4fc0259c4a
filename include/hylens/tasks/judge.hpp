#pragma once
// A Judge (tasks/task.hpp) implemented by a second model loaded with hylens: the rubric
// question is wrapped in the judge model's chat format as one user turn, the model answers
// greedily (a few tokens), and the answer is read with parse_yes_no. Anything but a clear
// "yes" counts as no. Used by the persona task when the runner is given --judge DIR.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/models/load.hpp"
#include "hylens/stack/generate.hpp"
#include "hylens/stack/tokens.hpp"
#include "hylens/tasks/task.hpp"
#include "hylens/tasks/yes_no.hpp"
#include "hylens/text/chat.hpp"
#include "hylens/text/tokenizer.hpp"

namespace hylens::tasks {

class ModelJudge final : public Judge {
public:
    /// `model` and `tokenizer` must outlive the judge. `stop_ids`: the judge model's end-of-turn
    /// ids (generation stops at one of them).
    ModelJudge(const AnyModel& model, const Tokenizer& tokenizer, ChatFamily family, std::size_t max_new = 4,
               std::vector<std::int64_t> stop_ids = {})
        : model_(&model), tok_(&tokenizer), family_(family), max_new_(max_new), stop_ids_(std::move(stop_ids)) {
        check(max_new_ > 0, "[ModelJudge] max_new must be at least 1");
        require_chat_specials(*tok_, chat_specials(chat_format(family_)), "the judge's tokenizer");
    }

    bool yes(std::string_view question) override {
        const Encoding enc = encode_chat(*tok_, wrap_chat(family_, question));
        check(!enc.ids.empty(), "[ModelJudge] the judge question encodes to no tokens");
        const std::vector<std::int64_t> prompt(enc.ids.begin(), enc.ids.end());
        std::vector<std::int64_t> out;
        model_->visit([&](const auto& m) {
            auto cache = m.new_cache();
            GenerateOptions opt;
            opt.max_new = max_new_;
            opt.stop_ids = stop_ids_;
            opt.check_finite = true;  // a NaN judge fails the study instead of answering "no"
            opt.keep_logits = false;  // the answer's ids alone
            out = generate(m, cache, TokenBatch(prompt), opt).ids.at(0);
        });
        last_answer_ = tok_->decode(std::vector<Tokenizer::TokenId>(out.begin(), out.end()), true);
        return parse_yes_no(last_answer_) == YesNo::yes;
    }

    /// The judge model's decoded answer to the last question.
    const std::string& last_answer() const noexcept { return last_answer_; }

private:
    const AnyModel* model_;
    const Tokenizer* tok_;
    ChatFamily family_;
    std::size_t max_new_;
    std::vector<std::int64_t> stop_ids_;
    std::string last_answer_;
};

}  // namespace hylens::tasks
