#pragma once
// The library's version: `hylens --version`, run.json's "hylens_version" (the tool's and
// Python's), hylens.__version__. The root CMakeLists.txt's project(VERSION) must say the same
// (tests/core/test_version.cpp compares them).

namespace hylens {

inline constexpr const char* version = "0.1.0";

}  // namespace hylens
