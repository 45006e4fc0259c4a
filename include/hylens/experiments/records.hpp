#pragma once
// items.jsonl: one JSON object per line, one line per (task, seed, item, condition), written
// as whole lines after every batch and flushed to disk (fsync) at most once a second
// (LineAppender), so a killed run leaves at most one torn last line. Reading for --resume drops
// a torn last line (cut off at the last '\n') and reports every other line that is not a record
// as an error naming the file and line. Files are read line by line (for_each_jsonl_line) and
// written through a temporary file (AtomicFileWriter), so neither needs the file in memory.

#include <algorithm>    // std::find
#include <cerrno>       // errno
#include <chrono>       // std::chrono
#include <cmath>        // std::isfinite
#include <cstdint>      // std::uint64_t
#include <cstring>      // std::strerror
#include <filesystem>   // std::filesystem
#include <fstream>      // std::ifstream
#include <set>          // std::set
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <tuple>        // std::tuple
#include <vector>       // std::vector

#include <fcntl.h>   // open
#include <unistd.h>  // write, pread, fsync, close

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../io/json_depth.hpp"
#include "input_fingerprint.hpp"

namespace hylens::experiments {

/// One JSON line: compact, UTF-8 kept, invalid UTF-8 (a partial multi-byte token in a
/// generation) written as U+FFFD.
inline std::string json_line(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The identity of a record.
struct RecordKey {
    std::string task;
    std::uint64_t seed = 0;
    std::size_t item = 0;
    std::string condition;
    auto tie() const { return std::tie(task, seed, item, condition); }
    friend bool operator<(const RecordKey& a, const RecordKey& b) { return a.tie() < b.tie(); }
    friend bool operator==(const RecordKey& a, const RecordKey& b) { return a.tie() == b.tie(); }
};

/// The key of a record object; FormatError naming `where` if a key field is missing.
inline RecordKey record_key(const nlohmann::json& r, const std::string& where) {
    try {
        return {r.at("task").get<std::string>(), r.at("seed").get<std::uint64_t>(), r.at("item").get<std::size_t>(),
                r.at("condition").get<std::string>()};
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[items.jsonl] ", where, ": not a study record (", e.what(), ")");
    }
}

/// A channel-study record's score: a finite number in [0, 1] (every task's scorer gives one).
/// Read back on resume or merge, a score of another value (an edited file, another program's)
/// was averaged into the summaries, or dropped from them when not a number, without a word.
inline void check_record_score(const nlohmann::json& r, const std::string& where) {
    const auto it = r.find("score");
    const bool ok = it != r.end() && it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= 0.0 &&
                    it->get<double>() <= 1.0;
    check<FormatError>(ok, "[items.jsonl] ", where, ": score ", it == r.end() ? std::string("missing") : it->dump(),
                       " is not a number in [0, 1] (the file was edited or comes from another program)");
}

/// Calls `fn(line, text, offset)` for every line of a JSON-lines file, in order: its number
/// (from 1), its text without the '\n', and its byte offset. Reads the file in blocks, never
/// whole. With drop_torn_tail, a last line without its '\n' (a killed writer) is cut off the
/// file; otherwise it is an error. A missing file has no lines.
template <class Fn>
void for_each_jsonl_line(const std::filesystem::path& path, bool drop_torn_tail, Fn&& fn) {
    if (!std::filesystem::exists(path)) return;
    std::ifstream in(path, std::ios::binary);
    check<FormatError>(in.good(), "[jsonl] cannot open ", path.string());
    std::vector<char> block(std::size_t{1} << 20);
    std::string carry;             // the start of a line the last block cut
    std::uint64_t carry_at = 0;    // its offset
    std::uint64_t block_at = 0;    // the offset of block[0]
    std::size_t line = 0;
    while (in) {
        in.read(block.data(), static_cast<std::streamsize>(block.size()));
        const std::size_t n = static_cast<std::size_t>(in.gcount());
        std::size_t b = 0;  // the start of the block's next line
        while (b < n) {
            const char* nl = std::find(block.data() + b, block.data() + n, '\n');
            if (nl == block.data() + n) break;
            const auto e = static_cast<std::size_t>(nl - block.data());
            if (carry.empty()) {
                fn(++line, std::string_view(block.data() + b, e - b), block_at + b);
            } else {
                carry.append(block.data() + b, e - b);
                fn(++line, std::string_view(carry), carry_at);
                carry.clear();
            }
            b = e + 1;
        }
        if (b < n) {
            if (carry.empty()) carry_at = block_at + b;
            carry.append(block.data() + b, n - b);
        }
        block_at += n;
    }
    check<FormatError>(in.eof(), "[jsonl] cannot read ", path.string(), " to its end");
    if (!carry.empty()) {
        check<FormatError>(drop_torn_tail, "[jsonl] ", path.string(),
                           " ends in a torn line (a killed run?): continue it with --resume (Python: resume=True)");
        in.close();
        std::filesystem::resize_file(path, carry_at);
    }
}

/// One line of a JSON-lines file parsed, its nesting checked first; FormatError naming `where`.
inline nlohmann::json parse_jsonl_line(std::string_view text, const std::string& where) {
    io::check_json_depth(text, "[jsonl] " + where);
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& ex) {
        fail<FormatError>("[jsonl] ", where, " is not JSON: ", ex.what());
    }
}

/// Reads every line of a JSON-lines file as JSON (for_each_jsonl_line).
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path, bool drop_torn_tail) {
    std::vector<nlohmann::json> out;
    for_each_jsonl_line(path, drop_torn_tail, [&](std::size_t line, std::string_view text, std::uint64_t) {
        out.push_back(parse_jsonl_line(text, path.string() + " line " + std::to_string(line)));
    });
    return out;
}

/// Reads the records of an items.jsonl (read_jsonl), checking that each line is a record.
inline std::vector<nlohmann::json> read_records(const std::filesystem::path& path, bool drop_torn_tail) {
    std::vector<nlohmann::json> out = read_jsonl(path, drop_torn_tail);
    for (std::size_t i = 0; i < out.size(); ++i) (void)record_key(out[i], path.string() + " line " + std::to_string(i + 1));
    return out;
}

/// Appends whole lines to a file. sync() writes the queued lines in one append (a killed
/// process loses none of them: they are the kernel's) and flushes the file to disk (fsync) at
/// most once per `sync_every`, and when the appender closes: a crash of the machine loses at
/// most the lines of the last `sync_every`, and a resume drops a torn last line. An fsync per
/// sync() cost a short study 13 % of its time (984 fsyncs in the 4.5 s demo study).
class LineAppender {
public:
    static constexpr std::chrono::milliseconds kSyncEvery{1000};

    explicit LineAppender(const std::filesystem::path& path, std::chrono::milliseconds sync_every = kSyncEvery)
        : path_(path.string()), sync_every_(sync_every), last_fsync_(std::chrono::steady_clock::now()) {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        check(fd_ >= 0, "[jsonl] cannot open ", path_, " for writing: ", std::strerror(errno));
    }
    LineAppender(const LineAppender&) = delete;
    LineAppender& operator=(const LineAppender&) = delete;
    ~LineAppender() {
        if (fd_ < 0) return;
        if (unsynced_) (void)::fsync(fd_);  // no exception from a destructor; the lines are written
        ::close(fd_);
    }
    /// Queues one line (a '\n' is added).
    void add(const std::string& line) {
        pending_ += line;
        pending_ += '\n';
    }
    /// Writes the queued lines in one append, and fsyncs when the last fsync is `sync_every` old.
    void sync() {
        std::size_t done = 0;
        while (done < pending_.size()) {
            const ssize_t w = ::write(fd_, pending_.data() + done, pending_.size() - done);
            if (w < 0 && errno == EINTR) continue;
            check(w > 0, "[items.jsonl] writing ", path_, " failed: ", std::strerror(errno));
            done += static_cast<std::size_t>(w);
        }
        pending_.clear();
        unsynced_ = true;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_fsync_ < sync_every_) return;
        check(::fsync(fd_) == 0, "[items.jsonl] fsync of ", path_, " failed: ", std::strerror(errno));
        last_fsync_ = now;
        unsynced_ = false;
        ++fsyncs_;
    }

    /// Writes what is queued, flushes the file to disk if a line is unflushed, and closes it.
    void close() {
        if (fd_ < 0) return;
        sync();
        const bool synced = !unsynced_ || ::fsync(fd_) == 0;
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        check(synced, "[items.jsonl] fsync of ", path_, " failed: ", std::strerror(err));
    }

    /// fsyncs made by sync() so far (not counting the one at close).
    std::size_t fsyncs() const noexcept { return fsyncs_; }

private:
    std::string path_;
    int fd_ = -1;
    std::string pending_;
    std::chrono::milliseconds sync_every_;
    std::chrono::steady_clock::time_point last_fsync_;
    bool unsynced_ = false;
    std::size_t fsyncs_ = 0;
};

/// Writes a file through a temporary file beside it (`path` + ".tmp") and a rename, so `path`
/// is never half a file: write() appends, commit() flushes it to disk (fsync) and renames it.
/// A writer destroyed without commit() removes its temporary file.
class AtomicFileWriter {
public:
    explicit AtomicFileWriter(const std::filesystem::path& path) : path_(path), tmp_(path.string() + ".tmp") {
        fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        check(fd_ >= 0, "[experiment] cannot write ", tmp_.string(), ": ", std::strerror(errno));
    }
    AtomicFileWriter(const AtomicFileWriter&) = delete;
    AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
    ~AtomicFileWriter() {
        if (fd_ >= 0) ::close(fd_);
        std::error_code ec;
        if (!committed_) std::filesystem::remove(tmp_, ec);  // no exception from a destructor
    }
    void write(std::string_view text) {
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t w = ::write(fd_, text.data() + done, text.size() - done);
            if (w < 0 && errno == EINTR) continue;
            check(w > 0, "[experiment] writing ", tmp_.string(), " failed: ", std::strerror(errno));
            done += static_cast<std::size_t>(w);
        }
    }
    /// Flushes the file to disk and renames it to its path; on failure the temporary file is
    /// removed (by the destructor) and `path` left as it was.
    void commit() {
        const bool synced = ::fsync(fd_) == 0;
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        check(synced, "[experiment] fsync of ", tmp_.string(), " failed: ", std::strerror(err));
        std::filesystem::rename(tmp_, path_);
        committed_ = true;
    }

private:
    std::filesystem::path path_, tmp_;
    int fd_ = -1;
    bool committed_ = false;
};

/// Writes `text` to `path` through a temporary file and a rename (never half a file).
inline void write_file_atomic(const std::filesystem::path& path, std::string_view text) {
    AtomicFileWriter w(path);
    w.write(text);
    w.commit();
}

/// Where a record's line lies: in which of a list of files, its line number, at what byte, how
/// long, and the fnv1a64 of its text when it was read (a line changed since is an error, not
/// another record).
struct LineRef {
    std::size_t file = 0;
    std::size_t line = 0;
    std::uint64_t offset = 0;
    std::size_t length = 0;
    std::uint64_t fnv1a64 = 0;
};

/// The LineRef of a line for_each_jsonl_line passed.
inline LineRef line_ref(std::size_t file, std::size_t line, std::string_view text, std::uint64_t offset) {
    detail::Fnv1a h;
    h.add(text);
    return {file, line, offset, text.size(), h.h};
}

/// Writes the lines `refs` of `files`, in that order, each as json_line writes its record
/// (the same text for a line json_line wrote), to `path` through a temporary file
/// (AtomicFileWriter); returns the fnv1a64_hex of what it wrote. Reads one line at a time; a
/// file is opened when a line of it is first read (a file no line is of, a merged folder
/// without items.jsonl, is never opened), and at most kMaxOpenFiles at once (the merge of a
/// thousand shards reads their lines interleaved).
inline std::string write_record_lines(const std::filesystem::path& path, const std::vector<std::filesystem::path>& files,
                                      const std::vector<LineRef>& refs) {
    constexpr std::size_t kMaxOpenFiles = 64;
    AtomicFileWriter out(path);
    detail::Fnv1a hash;
    std::vector<int> fds(files.size(), -1);
    std::vector<std::size_t> open;  // the files with an fd, oldest first
    const auto close_all = [&] {
        for (const std::size_t f : open) ::close(fds[f]);
        open.clear();
    };
    try {
        std::string text, chunk;
        const auto flush = [&] {
            hash.add(chunk);
            out.write(chunk);
            chunk.clear();
        };
        for (const LineRef& l : refs) {
            check(l.file < files.size(), "[jsonl] a line of file ", l.file, " of ", files.size());
            const std::string where = files[l.file].string() + " line " + std::to_string(l.line);
            if (fds[l.file] < 0) {
                if (open.size() == kMaxOpenFiles) {
                    ::close(fds[open.front()]);
                    fds[open.front()] = -1;
                    open.erase(open.begin());
                }
                fds[l.file] = ::open(files[l.file].c_str(), O_RDONLY | O_CLOEXEC);
                check<FormatError>(fds[l.file] >= 0, "[jsonl] cannot open ", files[l.file].string(), ": ", std::strerror(errno));
                open.push_back(l.file);
            }
            text.resize(l.length);
            std::size_t got = 0;
            while (got < l.length) {
                const ssize_t r = ::pread(fds[l.file], text.data() + got, l.length - got, static_cast<off_t>(l.offset + got));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) break;
                got += static_cast<std::size_t>(r);
            }
            check<FormatError>(got == l.length && line_ref(l.file, l.line, text, l.offset).fnv1a64 == l.fnv1a64, "[jsonl] ",
                               where, " is not the line read there before: the file changed while it was read");
            chunk += json_line(parse_jsonl_line(text, where));
            chunk += '\n';
            if (chunk.size() >= (std::size_t{1} << 20)) flush();
        }
        flush();
    } catch (...) {
        close_all();
        throw;
    }
    close_all();
    out.commit();
    return hash.hex();
}

}  // namespace hylens::experiments
