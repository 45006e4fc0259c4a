#pragma once
// What a study read, by content: a fingerprint of each input folder or file a result's run.json
// names (model, tokenizer, host, donor), so that a resume or a merge compares what was read,
// not where it lay. Two copies of one checkpoint in different folders (node-local scratch of
// two cluster nodes) agree; a checkpoint overwritten in place does not.
//
// Two digests of each, as 16 hex digits ("" when the path does not exist):
// * "<key>_contents" (input_contents): XXH3-64 (the xxHash library) over every byte read: for
//   a folder config.json's bytes, model.safetensors.index.json's, and, for every *.safetensors
//   file in name order, its name and its bytes, weights included; for a checkpoint named by
//   one of its files, its folder's; for another file its bytes. A checkpoint retrained in
//   place with the same shapes differs here only.
// * "<key>_fingerprint" (input_fingerprint, kept for folders written before the contents
//   digest): FNV-1a (64 bit) over config.json's bytes and, for every *.safetensors file, its
//   name, size and JSON header (tensor names, dtypes, shapes, offsets; no weights); for a file
//   its bytes.
// A resume or a merge compares the contents where both run.json files have them, else the
// fingerprints (study_folder.hpp: differing_input).

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
#include <xxhash.h>

#include "../core/error.hpp"

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

/// The *.safetensors files of a model folder, in name order (what both digests read).
inline std::vector<std::filesystem::path> safetensors_files(const std::filesystem::path& folder) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(folder, ec))
        if (e.path().extension() == ".safetensors") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
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
        for (const fs::path& s : detail::safetensors_files(p)) {
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

namespace detail {

/// XXH3-64 of a stream of byte runs, as 16 hex digits.
class Xxh3 {
public:
    Xxh3() : st_(XXH3_createState()) {
        check(st_ != nullptr && XXH3_64bits_reset(st_) == XXH_OK, "[input_contents] cannot start an XXH3 digest");
    }
    ~Xxh3() { XXH3_freeState(st_); }
    Xxh3(const Xxh3&) = delete;
    Xxh3& operator=(const Xxh3&) = delete;
    void add(std::string_view s) { XXH3_64bits_update(st_, s.data(), s.size()); }
    /// Every byte of the file at `p`; false when it cannot be read to its end.
    bool add_file(const std::filesystem::path& p) {
        std::ifstream in(p, std::ios::binary);
        if (!in) return false;
        std::vector<char> buf(std::size_t{1} << 20);
        while (in) {
            in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
            XXH3_64bits_update(st_, buf.data(), static_cast<std::size_t>(in.gcount()));
        }
        return in.eof();
    }
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(st_)));
        return buf;
    }

private:
    XXH3_state_t* st_;
};

}  // namespace detail

/// The contents digest of an input folder or file (see the top of this header): every byte
/// the model or tokenizer is read from. A checkpoint named by one of its files (a
/// .safetensors file or a .safetensors.index.json, as load_model accepts) is its folder's
/// digest: the loader reads the folder's config.json and shards. A file that cannot be read is
/// an Error naming it.
inline std::string input_contents(const std::filesystem::path& p) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(p, ec)) return "";
    const std::string name = p.filename().string();
    if (!fs::is_directory(p, ec) && (name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")))
        return input_contents(fs::absolute(p).parent_path());
    detail::Xxh3 h;
    const auto add = [&](const fs::path& f) {
        check(h.add_file(f), "[input_contents] cannot read ", f.string(), " to its end");
    };
    if (fs::is_directory(p, ec)) {
        if (fs::exists(p / "config.json", ec)) add(p / "config.json");
        if (fs::exists(p / "model.safetensors.index.json", ec)) add(p / "model.safetensors.index.json");  // which shard holds what
        for (const fs::path& s : detail::safetensors_files(p)) {
            h.add(s.filename().string());
            h.add(std::string_view("\0", 1));  // the name ends here, whatever the bytes after it
            add(s);
        }
    } else {
        add(p);
    }
    return h.hex();
}

/// FNV-1a (64 bit) of a string as 16 hex digits: the fingerprint of an input given as text
/// (the circuit study's filler).
inline std::string fnv1a64_hex(std::string_view s) {
    detail::Fnv1a f;
    f.add(s);
    return f.hex();
}

/// fnv1a64_hex of a file's bytes, read in blocks (that of no bytes when it cannot be opened):
/// the fingerprint of a study's items.jsonl, which may be larger than the memory.
inline std::string fnv1a64_file_hex(const std::filesystem::path& p) {
    detail::Fnv1a f;
    std::ifstream in(p, std::ios::binary);
    std::vector<char> buf(std::size_t{1} << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        f.add(std::string_view(buf.data(), static_cast<std::size_t>(in.gcount())));
    }
    return f.hex();
}

/// The input keys of a run.json that name a folder or a file.
inline constexpr const char* kInputPathKeys[] = {"model", "tokenizer", "host", "host_tokenizer", "donor", "donor_tokenizer"};

/// `run_info` with "<key>_fingerprint" and "<key>_contents" beside every input path it names
/// that exists.
inline nlohmann::json with_input_fingerprints(nlohmann::json run_info) {
    if (!run_info.is_object()) return run_info;
    for (const char* key : kInputPathKeys)
        if (run_info.contains(key) && run_info[key].is_string()) {
            const std::string path = run_info[key].get<std::string>();
            if (const std::string fp = input_fingerprint(path); !fp.empty()) run_info[std::string(key) + "_fingerprint"] = fp;
            if (const std::string c = input_contents(path); !c.empty()) run_info[std::string(key) + "_contents"] = c;
        }
    return run_info;
}

/// `info` (an object naming inputs, such as a persona judge's) as an identity by content: every
/// input path it names (kInputPathKeys) that exists is replaced by "<key>_contents", its
/// contents digest (kept where `info` already has it), and any "<key>_fingerprint" is dropped.
/// A copy of the input at another path is the same identity, the input changed in place
/// another. A path that does not exist, and every other field, stay as written.
inline nlohmann::json identity_by_contents(nlohmann::json info) {
    if (!info.is_object()) return info;
    for (const char* key : kInputPathKeys) {
        const std::string ck = std::string(key) + "_contents";
        info.erase(std::string(key) + "_fingerprint");
        if (!info.contains(key) || !info[key].is_string()) continue;
        if (!info.contains(ck)) {
            const std::string c = input_contents(info[key].get<std::string>());
            if (c.empty()) continue;
            info[ck] = c;
        }
        info.erase(key);
    }
    return info;
}

}  // namespace hylens::experiments
