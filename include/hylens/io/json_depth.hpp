#pragma once
// A bound on how deeply a JSON file the library reads may nest arrays and objects. nlohmann's
// json copies and compares values recursively, so a file nested tens of thousands of levels
// deep (a damaged or hostile config.json, tokenizer.json, items.jsonl line or circuit file)
// overflowed the stack: a crash, where every other defect of those files is a FormatError.
// Real files nest a handful of levels; the bound leaves room for any of them.

#include <cstddef>      // std::size_t
#include <string_view>  // std::string_view

#include "../core/error.hpp"

namespace hylens::io {

inline constexpr std::size_t kMaxJsonDepth = 512;

/// Throws FormatError, naming `origin`, when `text` opens more than kMaxJsonDepth arrays or
/// objects inside one another (brackets inside strings do not count). Linear in the text.
inline void check_json_depth(std::string_view text, std::string_view origin) {
    std::size_t depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;  // the escaped character cannot end the string
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            check<FormatError>(++depth <= kMaxJsonDepth, origin, ": JSON nested deeper than ", kMaxJsonDepth,
                               " levels (at byte ", i, "); no file hylens reads nests more than a few");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
}

}  // namespace hylens::io
