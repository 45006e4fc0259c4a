#pragma once
// An Item as one JSON object (the `hylens tasks --json` line) and back.
//   {"task", "seed", "index", "context", "query", "expected", "alt_context", "alt_expected",
//    "spans": [{"name", "in", "begin", "end"}...], "fields": {...}}

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <string>   // std::string

#include <nlohmann/json.hpp>

#include "hylens/core/error.hpp"
#include "hylens/tasks/item.hpp"

namespace hylens::tasks {

inline nlohmann::json item_to_json(const Item& item) {
    nlohmann::json spans = nlohmann::json::array();
    for (const TextSpan& s : item.spans) spans.push_back({{"name", s.name}, {"in", s.in}, {"begin", s.begin}, {"end", s.end}});
    return nlohmann::json{{"task", item.task},
                          {"seed", item.seed},
                          {"index", item.index},
                          {"context", item.context},
                          {"query", item.query},
                          {"expected", item.expected},
                          {"alt_context", item.alt_context},
                          {"alt_expected", item.alt_expected},
                          {"spans", spans},
                          {"fields", item.fields}};
}

/// Reads what item_to_json wrote; a missing or mistyped member is a FormatError naming it.
inline Item item_from_json(const nlohmann::json& j) {
    const auto member = [&](const char* name) -> const nlohmann::json& {
        check<FormatError>(j.is_object() && j.contains(name), "[item_from_json] missing member '", name, "'");
        return j.at(name);
    };
    // A whole number >= 0: the JSON library converts a float (3.3e122, 1.5) to an integer
    // without a check, undefined behaviour (found by fuzzing).
    const auto whole = [](const nlohmann::json& v, const char* name) -> std::uint64_t {
        check<FormatError>(v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0),
                           "[item_from_json] '", name, "' must be a whole number >= 0, got ", v.dump());
        return v.get<std::uint64_t>();
    };
    try {
        Item item;
        item.task = member("task").get<std::string>();
        item.seed = whole(member("seed"), "seed");
        item.index = static_cast<std::size_t>(whole(member("index"), "index"));
        item.context = member("context").get<std::string>();
        item.query = member("query").get<std::string>();
        item.expected = member("expected").get<std::vector<std::string>>();
        item.alt_context = member("alt_context").get<std::string>();
        item.alt_expected = member("alt_expected").get<std::vector<std::string>>();
        for (const nlohmann::json& s : member("spans"))
            item.spans.push_back({s.at("name").get<std::string>(), s.at("in").get<std::string>(),
                                  static_cast<std::size_t>(whole(s.at("begin"), "spans.begin")),
                                  static_cast<std::size_t>(whole(s.at("end"), "spans.end"))});
        item.fields = member("fields");
        return item;
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[item_from_json] ", e.what());
    }
}

}  // namespace hylens::tasks
