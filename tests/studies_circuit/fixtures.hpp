#pragma once
// Fixtures of the Encode-Address study tests (circuit, encode-swap, transplant, query-map,
// stitch): the temporary folder and file reads of tests/experiments/fixtures.hpp, a whole-file
// write, a private copy of an organism and the records of a result folder.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <hylens/experiments/records.hpp>
#include <nlohmann/json.hpp>

#include "experiments/fixtures.hpp"

namespace hylens::test::studies {

using hylens::test::read_text;
using hylens::test::TempDir;

inline void write_text(const std::filesystem::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << s;
}

#ifdef HYLENS_MODELS_DIR
/// A private copy of an organism's folder (config, weights, tokenizer) under root: the
/// organisms may be retrained while a test runs.
inline std::filesystem::path organism_copy(const std::string& name, const std::filesystem::path& root) {
    const std::filesystem::path src = std::filesystem::path(HYLENS_MODELS_DIR) / name, dst = root / name;
    std::filesystem::create_directories(dst);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) std::filesystem::copy_file(src / f, dst / f);
    return dst;
}
#endif

/// Every record of a result folder's items.jsonl, in file order.
inline std::vector<nlohmann::json> records_of(const std::filesystem::path& dir) {
    return experiments::read_jsonl(dir / "items.jsonl", /*drop_torn_tail=*/false);
}

}  // namespace hylens::test::studies
