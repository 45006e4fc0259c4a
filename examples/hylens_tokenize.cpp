// SPDX-License-Identifier: Apache-2.0
// A minimal driver for the tokenizer subcommands (the full `hylens` CLI calls the same
// functions): hylens_tokenize tokenize --tokenizer tokenizer.json [--offsets] < text.txt
#include <iostream>
#include <string_view>

#include "hylens/text/cli.hpp"

int main(int argc, char** argv) {
    const std::string_view cmd = argc > 1 ? argv[1] : "";
    if (cmd == "tokenize") return hylens::run_tokenize(argc - 1, argv + 1);
    if (cmd == "detokenize") return hylens::run_detokenize(argc - 1, argv + 1);
    std::cerr << "usage: hylens_tokenize tokenize|detokenize --tokenizer FILE [options]  (--help for details)\n";
    return cmd == "--help" || cmd == "-h" ? 0 : 2;
}
