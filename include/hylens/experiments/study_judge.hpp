#pragma once
// The persona task's model judge as the studies set it up, for the tool's --judge and Python's
// judge=: the judge model answers in its own chat format, at most 4 tokens, stopping at its
// end-of-turn ids; run.json and the study definition name it by its model folder, model type
// and tokenizer file, so a resume with another judge is refused.

#include <filesystem>  // std::filesystem::absolute

#include <nlohmann/json.hpp>

#include "../models/load.hpp"    // AnyModel
#include "../tasks/judge.hpp"    // tasks::ModelJudge
#include "../text/tokenizer.hpp"
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
/// string).
inline nlohmann::json study_judge_info(const std::filesystem::path& model_folder, const AnyModel& model,
                                       const Tokenizer& tokenizer) {
    return {{"model", std::filesystem::absolute(model_folder).string()},
            {"model_type", model.config().model_type},
            {"tokenizer", tokenizer.source().empty() ? nlohmann::json(nullptr) : nlohmann::json(tokenizer.source())}};
}

}  // namespace hylens::experiments
