#pragma once
// Helpers for the io tests: a self-deleting temporary folder and raw file writers for
// hand-made (often hostile) safetensors files.

#include <doctest/doctest.h>
#include <stdlib.h>  // ::mkdtemp

#include <cstddef>     // std::byte
#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <string>      // std::string
#include <string_view> // std::string_view
#include <vector>      // std::vector

namespace hylens::io_test {

/// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "hylens-io-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path_ = tmpl;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& p, std::string_view bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    REQUIRE(out.good());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

/// [u64 little-endian length][header][data] with an explicit (possibly lying) length field.
inline std::string raw_file(std::uint64_t header_len, std::string_view header, std::string_view data) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header_len >> (8 * i)) & 0xff);
    out.append(header);
    out.append(data);
    return out;
}

/// A well-framed file: the length field matches the header.
inline std::string raw_file(std::string_view header, std::string_view data) {
    return raw_file(header.size(), header, data);
}

/// Runs fn, expects an E, returns its message (fails the test if nothing or something else is thrown).
template <class E, class F>
std::string message_of_throw(F&& fn) {
    try {
        fn();
    } catch (const E& e) {
        return e.what();
    }
    FAIL("expected exception not thrown");
    return {};
}

inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace hylens::io_test
