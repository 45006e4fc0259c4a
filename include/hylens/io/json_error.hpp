#pragma once
// Shortens nlohmann's parse-error text for our messages: drops its "[json.exception...] parse
// error at line L, column C: " prefix (we report our own position, in file terms) and caps
// the length, since the text quotes the last token read, which a hostile file can make huge.

#include <cstddef>  // std::size_t
#include <string>   // std::string

namespace hylens::io::detail {

inline std::string json_error_reason(std::string what, std::size_t max_chars = 240) {
    const auto col = what.find(", column ");
    if (col != std::string::npos) {
        const auto colon = what.find(": ", col);
        if (colon != std::string::npos) what = what.substr(colon + 2);
    }
    if (what.size() > max_chars) what = what.substr(0, max_chars) + "...";
    return what;
}

}  // namespace hylens::io::detail
