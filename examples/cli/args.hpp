#pragma once
// Minimal argument parsing for the hylens command-line tool: --name value pairs and flags.

#include <hylens/core/error.hpp>

#include <map>
#include <string>
#include <vector>

namespace hylens::cli {

class Args {
public:
    /// Parses argv[first..]; `flags` are options without a value.
    Args(int argc, char** argv, int first, const std::vector<std::string>& flags = {}) {
        for (int i = first; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "-h" || a == "--help") {
                help_ = true;
                continue;
            }
            check(a.rfind("--", 0) == 0, "unexpected argument '", a, "' (options start with --)");
            bool is_flag = false;
            for (const auto& f : flags) is_flag = is_flag || f == a;
            if (is_flag) {
                values_[a] = "1";
            } else {
                check(i + 1 < argc, "option ", a, " needs a value");
                values_[a] = argv[++i];
            }
        }
    }
    bool help() const noexcept { return help_; }
    bool has(const std::string& k) const { return values_.count(k) != 0; }
    std::string get(const std::string& k) const {
        auto it = values_.find(k);
        check(it != values_.end(), "missing option ", k, " (see --help)");
        return it->second;
    }
    std::string get(const std::string& k, const std::string& fallback) const { return has(k) ? get(k) : fallback; }

private:
    bool help_ = false;
    std::map<std::string, std::string> values_;
};

}  // namespace hylens::cli
