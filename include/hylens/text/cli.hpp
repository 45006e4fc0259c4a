// SPDX-License-Identifier: Apache-2.0
// The `hylens tokenize` and `hylens detokenize` subcommands, as functions the hylens CLI calls.
#pragma once

#include <cstdint>      // std::int32_t
#include <exception>    // std::exception
#include <iostream>     // std::cin, std::cout, std::cerr
#include <istream>      // std::istream
#include <ostream>      // std::ostream
#include <string>       // std::string, std::getline
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/text/tokenizer.hpp"

namespace hylens {

namespace detail {

struct TokenizeArgs {
    std::string tokenizer;
    bool offsets = false, add_special = false, skip_special = false, help = false;
    std::string error;
};

inline TokenizeArgs parse_tokenize_args(int argc, char** argv, bool detokenize) {
    TokenizeArgs a;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") a.help = true;
        else if (arg == "--tokenizer" && i + 1 < argc) a.tokenizer = argv[++i];
        else if (arg.substr(0, 12) == "--tokenizer=") a.tokenizer = std::string(arg.substr(12));
        else if (!detokenize && arg == "--offsets") a.offsets = true;
        else if (!detokenize && arg == "--add-special") a.add_special = true;
        else if (detokenize && arg == "--skip-special") a.skip_special = true;
        else a.error = "unknown or incomplete argument '" + std::string(arg) + "'";
    }
    if (!a.help && a.error.empty() && a.tokenizer.empty()) a.error = "--tokenizer FILE is required";
    return a;
}

inline constexpr const char* kTokenizeUsage =
    "usage: hylens tokenize --tokenizer FILE [--offsets] [--add-special]\n"
    "\n"
    "Reads UTF-8 text from standard input and encodes each line on its own (without its '\\n';\n"
    "a '\\r' before it is part of the line). Prints one line per input line: the token ids\n"
    "separated by spaces, or with --offsets 'id:start:end' triples, where [start, end) are\n"
    "character (code point) offsets in the line. Special tokens of the post-processor (e.g. a\n"
    "BOS) are added only with --add-special. Invalid UTF-8 is read as U+FFFD.\n";

inline constexpr const char* kDetokenizeUsage =
    "usage: hylens detokenize --tokenizer FILE [--skip-special]\n"
    "\n"
    "Reads lines of space-separated token ids (or the 'id:start:end' triples of\n"
    "`hylens tokenize --offsets`) from standard input and prints each line decoded to text.\n"
    "With --skip-special, special tokens are left out. Decoded text can itself contain line\n"
    "breaks.\n";

/// Parses "12 7 9" or "12:0:3 7:3:4": the ids.
inline std::vector<std::int32_t> parse_id_line(const std::string& line, std::size_t line_no) {
    std::vector<std::int32_t> ids;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        if (i >= line.size()) break;
        std::size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
        const std::string field = line.substr(i, j - i);
        const std::string id_text = field.substr(0, field.find(':'));
        std::int64_t v = 0;
        bool ok = !id_text.empty() && id_text.size() <= 10;
        for (const char c : id_text) ok &= c >= '0' && c <= '9';
        if (ok) {
            for (const char c : id_text) v = v * 10 + (c - '0');
            ok = v <= 0x7FFFFFFF;
        }
        check<Error>(ok, "[detokenize] line ", line_no, ": '", field, "' is not a token id");
        ids.push_back(static_cast<std::int32_t>(v));
        i = j;
    }
    return ids;
}

}  // namespace detail

/// `hylens tokenize`, with explicit streams (for tests). Returns the exit status.
inline int run_tokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
    const auto args = detail::parse_tokenize_args(argc, argv, false);
    if (args.help) {
        out << detail::kTokenizeUsage;
        return 0;
    }
    if (!args.error.empty()) {
        err << "hylens tokenize: " << args.error << "\n" << detail::kTokenizeUsage;
        return 2;
    }
    try {
        const Tokenizer tok = Tokenizer::from_file(args.tokenizer);
        std::string line;
        while (std::getline(in, line)) {
            const Encoding enc = tok.encode(line, {.add_special = args.add_special});
            std::string text;
            for (std::size_t i = 0; i < enc.size(); ++i) {
                if (i) text.push_back(' ');
                text += std::to_string(enc.ids[i]);
                if (args.offsets)
                    text += ":" + std::to_string(enc.offsets[i].begin) + ":" + std::to_string(enc.offsets[i].end);
            }
            out << text << '\n';
        }
        out.flush();
    } catch (const std::exception& e) {
        err << "hylens tokenize: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

/// `hylens detokenize`, with explicit streams (for tests). Returns the exit status.
inline int run_detokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
    const auto args = detail::parse_tokenize_args(argc, argv, true);
    if (args.help) {
        out << detail::kDetokenizeUsage;
        return 0;
    }
    if (!args.error.empty()) {
        err << "hylens detokenize: " << args.error << "\n" << detail::kDetokenizeUsage;
        return 2;
    }
    try {
        const Tokenizer tok = Tokenizer::from_file(args.tokenizer);
        std::string line;
        std::size_t line_no = 0;
        while (std::getline(in, line)) {
            ++line_no;
            out << tok.decode(detail::parse_id_line(line, line_no), args.skip_special) << '\n';
        }
        out.flush();
    } catch (const std::exception& e) {
        err << "hylens detokenize: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

/// `hylens tokenize --tokenizer FILE [--offsets] [--add-special]` on standard input/output.
/// argv[0] is the subcommand name.
inline int run_tokenize(int argc, char** argv) { return run_tokenize(argc, argv, std::cin, std::cout, std::cerr); }

/// `hylens detokenize --tokenizer FILE [--skip-special]` on standard input/output.
inline int run_detokenize(int argc, char** argv) { return run_detokenize(argc, argv, std::cin, std::cout, std::cerr); }

}  // namespace hylens
