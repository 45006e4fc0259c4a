#pragma once
// Parses a yes/no answer (the DRM and conjunction recognition probes, the persona judge).

#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/tasks/normalize.hpp"

namespace hylens::tasks {

enum class YesNo { yes, no, unknown };

inline const char* to_string(YesNo a) noexcept {
    return a == YesNo::yes ? "yes" : a == YesNo::no ? "no" : "unknown";
}

/// The answer of a generation to a yes/no question. The first word of the answer line decides
/// when it is a yes word (yes, yeah, yep, true, correct) or a no word (no, nope, false, not,
/// never); otherwise the answer line decides when it holds a standalone "yes" or "no" but
/// not both. Anything else is unknown (scored as wrong).
inline YesNo parse_yes_no(std::string_view generated) {
    const std::vector<std::string> w = words(answer_line(generated));
    if (w.empty()) return YesNo::unknown;
    const auto is_yes = [](const std::string& s) { return s == "yes" || s == "yeah" || s == "yep" || s == "true" || s == "correct"; };
    const auto is_no = [](const std::string& s) { return s == "no" || s == "nope" || s == "false" || s == "not" || s == "never"; };
    if (is_yes(w.front())) return YesNo::yes;
    if (is_no(w.front())) return YesNo::no;
    bool y = false, n = false;
    for (const std::string& s : w) {
        y = y || s == "yes";
        n = n || s == "no";
    }
    return y == n ? YesNo::unknown : y ? YesNo::yes : YesNo::no;
}

}  // namespace hylens::tasks
