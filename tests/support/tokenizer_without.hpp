#pragma once
// A tokenizer.json with one added token removed (from added_tokens and, where it is there too,
// from the model's vocabulary): another model's tokenizer, or one stripped of its added
// tokens, for the tests of the chat-format checks.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace hylens::test {

/// A tokenizer.json's text without the added token `content`.
inline std::string tokenizer_text_without(const std::string& json_text, std::string_view content) {
    nlohmann::json j = nlohmann::json::parse(json_text);
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& a : j["added_tokens"])
        if (a["content"] != content) kept.push_back(a);
    j["added_tokens"] = kept;
    if (j["model"].contains("vocab") && j["model"]["vocab"].is_object()) j["model"]["vocab"].erase(std::string(content));
    return j.dump();
}

/// The text of `file` (a tokenizer.json) without the added token `content`.
inline std::string tokenizer_without(const std::filesystem::path& file, std::string_view content) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return tokenizer_text_without(text.str(), content);
}

}  // namespace hylens::test
