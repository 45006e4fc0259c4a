#pragma once
// Fixtures of the Encode-Address study tests: the study tests' temporary folder and file reads
// (tests/experiments/fixtures.hpp), and a whole-file write.

#include <filesystem>
#include <fstream>
#include <string>

#include "experiments/fixtures.hpp"

namespace hylens::test::studies {

using hylens::test::read_text;
using hylens::test::TempDir;

inline void write_text(const std::filesystem::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << s;
}

}  // namespace hylens::test::studies
