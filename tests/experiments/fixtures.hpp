#pragma once
// Fixtures of the study tests: a byte-level tokenizer small enough for the golden models'
// 320-token vocabulary (256 byte tokens, no merges, and the chat specials of the three
// families: <|endoftext|>, <|im_start|>, <|im_end|>, <|begin_of_text|>, <|end_of_text|>,
// <|start_of_role|>, <|end_of_role|> as ids 256..262, and Qwen's <think>, </think> as 263, 264,
// not special as in Qwen's tokenizer), and two small tasks (a dictionary lookup with a
// B source for the swaps, and one without) defined here, independent of tasks/. The same
// tokenizer ships as tests/experiments/byte_tokenizer.json for the demo study of the docs.
// Also the helpers the study tests share: a temporary folder, a file read, and a shell
// command's exit status with the tool's command line for the CLI tests.

#include <hylens/experiments/channel_study.hpp>
#include <hylens/tasks/task.hpp>
#include <hylens/text/tokenizer.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS
#include <unistd.h>    // getpid

namespace hylens::test {

/// GPT-2's byte-to-unicode map: the printable character that stands for byte b.
inline std::string byte_char(int b) {
    int cp = b;
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    if (!printable) {
        int n = 0;
        for (int x = 0; x < b; ++x) n += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255));
        cp = 256 + n;
    }
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

inline std::string tiny_tokenizer_json() {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
    nlohmann::json added = nlohmann::json::array();
    const char* specials[] = {"<|endoftext|>",    "<|im_start|>",      "<|im_end|>",     "<|begin_of_text|>",
                              "<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"};
    for (int i = 0; i < 7; ++i)
        added.push_back({{"id", 256 + i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"special", true}});
    const char* tags[] = {"<think>", "</think>"};
    for (int i = 0; i < 2; ++i)
        added.push_back({{"id", 263 + i}, {"content", tags[i]}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"special", false}});
    nlohmann::json j = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", added},
        {"normalizer", nullptr},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
        {"post_processor", nullptr},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", nlohmann::json::array()}}}};
    return j.dump();
}

inline const Tokenizer& tiny_tokenizer() {
    static const Tokenizer tok = Tokenizer::from_string(tiny_tokenizer_json());
    return tok;
}

/// A per-test temporary folder, removed at the end.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name)
        : path(std::filesystem::temp_directory_path() / ("hylens_exp_" + name + "_" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

/// The exit status of a shell command (-1 if it did not exit normally).
inline int sh(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

#ifdef HYLENS_CLI
/// The hylens tool as the tests run it (a command line: through the emulator when cross-compiling).
inline const std::string kCli = HYLENS_CLI;
#endif

inline std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_text(const std::filesystem::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

/// The result files of two study folders that differ (or are missing); empty when the study
/// results are the same (run.json aside: it holds timings and arguments).
inline std::vector<std::string> differing_results(const std::filesystem::path& a, const std::filesystem::path& b) {
    std::vector<std::string> out;
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "diffs.csv", "skipped.jsonl"})
        if (!std::filesystem::exists(a / f) || !std::filesystem::exists(b / f) || read_text(a / f) != read_text(b / f))
            out.push_back(f);
    return out;
}

namespace detail {
inline std::uint64_t fixture_mix(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
}  // namespace detail

/// "lookup": 2 or 3 pairs of three-letter keys and values; the query asks one key. The B
/// source has other values at the same places (same length). Scored by exact match; the
/// item field "group" is "two" or "three" (pairs), the score field "answered" is true when
/// anything was generated.
inline tasks::TaskSpec lookup_task(bool swap = true) {
    tasks::TaskSpec t;
    t.name = swap ? "lookup" : "lookup_plain";
    t.description = "test dictionary lookup";
    t.swap = swap;
    t.max_new = 3;
    t.make = [name = t.name, swap](std::uint64_t seed, std::size_t index) {
        std::uint64_t r = detail::fixture_mix(seed * 1000003ULL + index);
        const auto word = [&](char first) {
            r = detail::fixture_mix(r);
            return std::string{first, static_cast<char>('a' + r % 26), static_cast<char>('a' + (r >> 8) % 26)};
        };
        const std::size_t n = 2 + (r >> 20) % 2;
        tasks::Item it;
        it.task = name;
        it.seed = seed;
        it.index = index;
        std::vector<std::string> keys, va, vb;
        for (std::size_t i = 0; i < n; ++i) {
            keys.push_back(word('k'));
            va.push_back(word('v'));
            vb.push_back(word('w'));
        }
        const std::size_t q = (r >> 40) % n;
        it.context = "Dictionary:";
        if (swap) it.alt_context = "Dictionary:";
        for (std::size_t i = 0; i < n; ++i) {
            it.context += " " + keys[i] + "=" + va[i];
            if (swap) it.alt_context += " " + keys[i] + "=" + vb[i];
        }
        it.query = "\nValue of " + keys[q] + "?";
        it.expected = {va[q]};
        if (swap) it.alt_expected = {vb[q]};
        it.fields = {{"group", n == 2 ? "two" : "three"}, {"target", q}};
        return it;
    };
    t.score = [](const tasks::Item& it, std::string_view gen, const tasks::ScoreContext&, tasks::Judge*) {
        tasks::Score s;
        s.score = gen == it.expected[0] ? 1.0 : 0.0;
        s.fields = {{"answered", !gen.empty()}, {"length", gen.size()}};
        return s;
    };
    return t;
}

}  // namespace hylens::test
