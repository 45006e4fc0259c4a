// The hylens command-line tool: run the library's operations on any model folder of the
// supported families. `hylens --help` lists the subcommands; each has its own --help.

#include <hylens/core/error.hpp>
#include <hylens/version.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/bench.hpp"
#include "cli/dump.hpp"
#include "cli/experiment.hpp"
#include "cli/generate.hpp"
#include "cli/info.hpp"
#include "cli/patch.hpp"
#include "cli/surgery.hpp"
#include "cli/tasks.hpp"
#include "cli/tokenize.hpp"
#include "cli/topk.hpp"
#include "cli/verify.hpp"

namespace {

constexpr const char* kHelp =
    "hylens: run and take apart hybrid language models (Qwen3.5 / Qwen3-Next, Granite 4.0 H, Falcon-H1)\n"
    "\n"
    "usage: hylens <command> [options]      (hylens <command> --help for details; hylens --version)\n"
    "\n"
    "commands:\n"
    "  info        print what a model folder holds\n"
    "  bench       prefill and decode tokens/s against the sgemm and bandwidth floors (llama-bench style)\n"
    "  generate    text (or ids) in, the model's continuation out (greedy or seeded sampling)\n"
    "  top-k       the most likely next tokens after a prompt, with probabilities\n"
    "  verify      scan every weight of a model folder for NaN / infinity\n"
    "  dump        prefill + decode, write logits, residual streams and caches (safetensors, JSON)\n"
    "  surgery     cache surgery conditions (KV-only, REC-only, state swaps ...) on text, ids or a surgery file\n"
    "  patch       mixer-output and recurrent-state patches on text, ids or a surgery file\n"
    "  tasks       print the items of the channel-study tasks (text or JSON lines)\n"
    "  experiment  studies with bootstrap CIs: channels, circuit, encode-swap, transplant, query-map, stitch; merge\n"
    "  tokenize    text lines from stdin -> token ids (tokenizer.json)\n"
    "  detokenize  token-id lines from stdin -> text\n";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {  // a usage error, as every other one (exit 2), with the help on stderr
        std::cerr << kHelp;
        return 2;
    }
    if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        std::cout << kHelp;
        return 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::cout << "hylens " << hylens::version << "\n";
        return 0;
    }
    const std::string cmd = argv[1];
    try {
        if (cmd == "dump") return hylens::cli::run_dump(argc, argv);
        if (cmd == "info") return hylens::cli::run_info(argc, argv);
        if (cmd == "bench") return hylens::cli::run_bench(argc, argv);
        if (cmd == "surgery") return hylens::cli::run_surgery(argc, argv);
        if (cmd == "patch") return hylens::cli::run_patch(argc, argv);
        if (cmd == "tasks") return hylens::cli::run_tasks(argc, argv);
        if (cmd == "experiment") return hylens::cli::run_experiment(argc, argv);
        if (cmd == "generate") return hylens::cli::run_generate(argc, argv);
        if (cmd == "top-k") return hylens::cli::run_top_k(argc, argv);
        if (cmd == "verify") return hylens::cli::run_verify(argc, argv);
        if (cmd == "tokenize") return hylens::cli::run_tokenize(argc, argv);
        if (cmd == "detokenize") return hylens::cli::run_detokenize(argc, argv);
        std::cerr << "hylens: unknown command '" << cmd << "'\n\n" << kHelp;
        return 2;
    } catch (const hylens::Error& e) {
        std::cerr << "hylens " << cmd << ": error: " << e.what() << "\n";
        return 1;
    } catch (const std::filesystem::filesystem_error& e) {  // a file or folder the command could not read or write
        std::cerr << "hylens " << cmd << ": error: " << e.what() << "\n";
        return 1;
    } catch (const nlohmann::json::type_error& e) {  // a JSON file's value that no check named (Python: FormatError)
        std::cerr << "hylens " << cmd << ": error: [json] a file holds a value of another type or shape: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "hylens " << cmd << ": unexpected error: " << e.what() << "\n";
        return 1;
    }
}
