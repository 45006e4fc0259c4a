// Shared access to the tokenizer fixtures: each tokenizer.json is loaded once per test binary.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "hylens/text/tokenizer.hpp"

namespace hylens::test {

inline std::string tokenizer_path(const std::string& name) {
    return std::string(HYLENS_TOKENIZER_FIXTURES) + "/" + name + "/tokenizer.json";
}

/// The fixture tokenizer `name` (qwen3, llama3, llama2, gemma3), loaded on first use.
inline const Tokenizer& fixture_tokenizer(const std::string& name) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    std::lock_guard lock(mutex);
    auto& slot = cache[name];
    if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::from_file(tokenizer_path(name)));
    return *slot;
}

}  // namespace hylens::test
