#pragma once
// What a study read, by content: a fingerprint of each input folder or file a result's run.json
// names (model, tokenizer, host, donor), so that a resume or a merge compares what was read,
// not where it lay. Two copies of one checkpoint in different folders (node-local scratch of
// two cluster nodes) agree; a checkpoint overwritten in place does not.
//
// A folder's fingerprint is FNV-1a (64 bit) over config.json's bytes and, for every
// *.safetensors file in name order, its name, its size and its JSON header (the tensor names,
// dtypes, shapes and offsets; the weights themselves are not read). A file's is FNV-1a over
// its bytes. Written as 16 hex digits; "" when the path does not exist.

#include <algorithm>   // std::sort, std::min
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t
#include <cstdio>      // std::snprintf
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream
#include <string>      // std::string
#include <string_view> // std::string_view
#include <system_error> // std::error_code
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

namespace hylens::experiments {

namespace detail {

struct Fnv1a {
    std::uint64_t h = 14695981039346656037ULL;
    void add(std::string_view s) {
        for (const unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    }
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
        return buf;
    }
};

/// Up to `limit` bytes of a file from `offset` ("" when it cannot be read).
inline std::string read_bytes(const std::filesystem::path& p, std::uint64_t offset, std::uint64_t limit) {
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(p, ec);
    if (ec || offset >= size) return "";
    limit = std::min(limit, size - offset);  // a header length read from a damaged file may be anything
    std::ifstream in(p, std::ios::binary);
    if (!in) return "";
    in.seekg(static_cast<std::streamoff>(offset));
    std::string s(static_cast<std::size_t>(limit), '\0');
    in.read(s.data(), static_cast<std::streamsize>(limit));
    s.resize(static_cast<std::size_t>(in.gcount()));
    return s;
}

}  // namespace detail

/// The fingerprint of an input folder or file (see the top of this header).
inline std::string input_fingerprint(const std::filesystem::path& p) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(p, ec)) return "";
    detail::Fnv1a f;
    if (fs::is_directory(p, ec)) {
        f.add(detail::read_bytes(p / "config.json", 0, std::uint64_t{1} << 24));
        std::vector<fs::path> shards;
        for (const auto& e : fs::directory_iterator(p, ec))
            if (e.path().extension() == ".safetensors") shards.push_back(e.path());
        std::sort(shards.begin(), shards.end());
        for (const fs::path& s : shards) {
            f.add(s.filename().string());
            f.add(std::to_string(fs::file_size(s, ec)));
            const std::string n8 = detail::read_bytes(s, 0, 8);
            std::uint64_t n = 0;
            for (std::size_t i = n8.size(); i-- > 0;) n = (n << 8) | static_cast<unsigned char>(n8[i]);
            f.add(n8);
            f.add(detail::read_bytes(s, 8, std::min<std::uint64_t>(n, std::uint64_t{1} << 27)));
        }
    } else {
        f.add(detail::read_bytes(p, 0, fs::file_size(p, ec)));
    }
    return f.hex();
}

/// FNV-1a (64 bit) of a string as 16 hex digits: the fingerprint of an input given as text
/// (the circuit study's filler).
inline std::string fnv1a64_hex(std::string_view s) {
    detail::Fnv1a f;
    f.add(s);
    return f.hex();
}

/// The input keys of a run.json that name a folder or a file.
inline constexpr const char* kInputPathKeys[] = {"model", "tokenizer", "host", "host_tokenizer", "donor", "donor_tokenizer"};

/// `run_info` with "<key>_fingerprint" beside every input path it names that exists.
inline nlohmann::json with_input_fingerprints(nlohmann::json run_info) {
    if (!run_info.is_object()) return run_info;
    for (const char* key : kInputPathKeys)
        if (run_info.contains(key) && run_info[key].is_string())
            if (const std::string fp = input_fingerprint(run_info[key].get<std::string>()); !fp.empty())
                run_info[std::string(key) + "_fingerprint"] = fp;
    return run_info;
}

}  // namespace hylens::experiments
