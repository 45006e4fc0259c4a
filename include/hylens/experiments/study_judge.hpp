#pragma once
// The persona task's model judge as the studies set it up, for the tool's --judge and Python's
// judge=: the judge model answers in its own chat format, at most 4 tokens, stopping at its
// end-of-turn ids. run.json names it by its model folder, model type and tokenizer file, with
// the contents digest of each (input_fingerprint.hpp); the study definition by its model type
// and the two digests, so a resume or merge with another judge, or with the judge retrained in
// place, is refused, and a copy of the judge at another path is the same study.

#include <filesystem>  // std::filesystem::absolute

#include <nlohmann/json.hpp>

#include "../models/load.hpp"    // AnyModel
#include "../tasks/judge.hpp"    // tasks::ModelJudge
#include "../text/tokenizer.hpp"
#include "input_fingerprint.hpp"  // input_contents
#include "prompt.hpp"            // chat_family, PromptRenderer

namespace hylens::experiments {

/// The judge the studies use: `model` and `tokenizer` must outlive it. Refuses a tokenizer
/// without the judge model's chat specials (naming "the judge's tokenizer").
inline tasks::ModelJudge study_judge(const AnyModel& model, const Tokenizer& tokenizer) {
    const ChatFamily family = chat_family(model.config().model_type);
    return tasks::ModelJudge(model, tokenizer, family, 4, PromptRenderer(tokenizer, family, "the judge's tokenizer").stop_ids());
}

/// StudyOptions::judge_info of a judge loaded from `model_folder` (made absolute, as the tool
/// writes it) with `tokenizer`, named by the file it was read from (null for one built from a
/// string), each with its contents digest ("model_contents", "tokenizer_contents").
inline nlohmann::json study_judge_info(const std::filesystem::path& model_folder, const AnyModel& model,
                                       const Tokenizer& tokenizer) {
    nlohmann::json info = {{"model", std::filesystem::absolute(model_folder).string()},
                           {"model_type", model.config().model_type},
                           {"tokenizer", tokenizer.source().empty() ? nlohmann::json(nullptr) : nlohmann::json(tokenizer.source())}};
    info["model_contents"] = input_contents(info["model"].get<std::string>());
    if (!tokenizer.source().empty()) info["tokenizer_contents"] = input_contents(tokenizer.source());
    return info;
}

}  // namespace hylens::experiments
