#pragma once
// hylens tokenize / hylens detokenize: text lines to token ids and back, with a tokenizer.json.

#include <hylens/core/error.hpp>
#include <hylens/text/tokenizer.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

namespace detail {

/// Parses "12 7 9" or "12:0:3 7:3:4" (the output of tokenize --offsets): the ids.
inline std::vector<Tokenizer::TokenId> parse_id_line(const std::string& line, std::size_t line_no) {
    std::vector<Tokenizer::TokenId> ids;
    std::istringstream in(line);
    std::string field;
    while (in >> field) {
        const std::string id_text = field.substr(0, field.find(':'));
        std::int64_t v = 0;
        bool ok = !id_text.empty() && id_text.size() <= 10;
        for (const char c : id_text) ok = ok && c >= '0' && c <= '9';
        if (ok) {
            for (const char c : id_text) v = v * 10 + (c - '0');
            ok = v <= 0x7FFFFFFF;
        }
        check<Error>(ok, "[detokenize] line ", line_no, ": '", field, "' is not a token id");
        ids.push_back(static_cast<Tokenizer::TokenId>(v));
    }
    return ids;
}

}  // namespace detail

/// `hylens tokenize`, with explicit streams (for tests). Returns the exit status.
inline int run_tokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
    CLI::App app{"Reads UTF-8 text from standard input and encodes each line on its own (without its '\\n'; a '\\r' "
                 "before it is part of the line). Prints one line per input line: the token ids separated by spaces, "
                 "or with --offsets 'id:start:end' triples, where [start, end) are character (code point) offsets "
                 "in the line. Special tokens of the post-processor (e.g. a BOS) are added only with --add-special. "
                 "Invalid UTF-8 is read as U+FFFD.",
                 "hylens tokenize"};
    std::string path;
    bool offsets = false, add_special = false;
    app.add_option("--tokenizer", path, "tokenizer.json")->required()->check(CLI::ExistingFile);
    app.add_flag("--offsets", offsets, "print id:start:end triples");
    app.add_flag("--add-special", add_special, "add the post-processor's special tokens");
    if (const int rc = parse(app, argc, argv, out, err); rc >= 0) return rc;
    try {
        const Tokenizer tok = Tokenizer::from_file(path);
        std::string line;
        while (std::getline(in, line)) {
            const Encoding enc = tok.encode(line, {.add_special = add_special});
            std::string text;
            for (std::size_t i = 0; i < enc.size(); ++i) {
                if (i) text.push_back(' ');
                text += std::to_string(enc.ids[i]);
                if (offsets) text += ":" + std::to_string(enc.offsets[i].begin) + ":" + std::to_string(enc.offsets[i].end);
            }
            out << text << '\n';
        }
        out.flush();
    } catch (const std::exception& e) {
        err << "hylens tokenize: error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

/// `hylens detokenize`, with explicit streams (for tests). Returns the exit status.
inline int run_detokenize(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
    CLI::App app{"Reads lines of space-separated token ids (or the 'id:start:end' triples of `hylens tokenize "
                 "--offsets`) from standard input and prints each line decoded to text. With --skip-special, special "
                 "tokens are left out. Decoded text can itself contain line breaks.",
                 "hylens detokenize"};
    std::string path;
    bool skip_special = false;
    app.add_option("--tokenizer", path, "tokenizer.json")->required()->check(CLI::ExistingFile);
    app.add_flag("--skip-special", skip_special, "leave special tokens out");
    if (const int rc = parse(app, argc, argv, out, err); rc >= 0) return rc;
    try {
        const Tokenizer tok = Tokenizer::from_file(path);
        std::string line;
        std::size_t line_no = 0;
        while (std::getline(in, line)) {
            const std::vector<Tokenizer::TokenId> ids = detail::parse_id_line(line, ++line_no);
            // decode() leaves out an id the tokenizer has no token for (a model's padding rows);
            // here it is an input error, not text to drop.
            for (const Tokenizer::TokenId id : ids)
                check<Error>(tok.id_to_token(id).has_value(), "[detokenize] line ", line_no, ": ", id,
                             " is not an id of this tokenizer (", tok.vocab_size(), " tokens)");
            out << tok.decode(ids, skip_special) << '\n';
        }
        out.flush();
    } catch (const std::exception& e) {
        err << "hylens detokenize: error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

inline int run_tokenize(int argc, char** argv) { return run_tokenize(argc, argv, std::cin, std::cout, std::cerr); }
inline int run_detokenize(int argc, char** argv) { return run_detokenize(argc, argv, std::cin, std::cout, std::cerr); }

}  // namespace hylens::cli
