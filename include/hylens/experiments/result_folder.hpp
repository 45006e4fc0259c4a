#pragma once
// Whether a path can be a study's (or a merge's) result folder, checked before any work, by the
// tool's --out options and Python's `out=` arguments alike: an existing path must be a folder,
// and the nearest existing path above it (as written, so 'file/../run' goes through 'file', as
// the system resolves it) must be a folder the user can write and enter (root may write
// anywhere). A file on the way ('results.txt/run1') or a dangling link was a filesystem error
// after the model had loaded.

#include <unistd.h>  // ::access, W_OK, X_OK

#include <filesystem>    // std::filesystem
#include <string>        // std::string
#include <system_error>  // std::error_code, std::errc

namespace hylens::experiments {

/// Why `s` cannot be a result folder ("'x' is a file, not a folder", ...), or "" when it can.
inline std::string result_folder_problem(const std::string& s) {
    namespace fs = std::filesystem;
    if (s.empty()) return "an empty path";
    std::error_code ec;
    fs::path up = fs::path(s);
    // The nearest path that exists; a path through a file is "not a directory" to stat, so the
    // walk goes on up to the file's own entry.
    for (;;) {
        const fs::file_status st = fs::symlink_status(up, ec);
        if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
            return "'" + s + "': " + up.string() + ": " + ec.message();
        if (fs::exists(st)) break;
        if (!up.has_relative_path() || up.parent_path() == up) break;
        up = up.parent_path();
        if (up.empty()) {
            up = ".";
            break;
        }
    }
    if (fs::is_symlink(fs::symlink_status(up, ec)) && !fs::exists(up, ec)) return "'" + s + "': " + up.string() + " is a link to nothing";
    const std::string where = up == fs::path(s) ? "'" + s + "'" : "'" + s + "': " + up.string();
    if (!fs::is_directory(up, ec)) return where + " is a file, not a folder";
    if (::access(up.c_str(), W_OK | X_OK) != 0) return where + " is a folder this user cannot write or enter";
    return {};
}

}  // namespace hylens::experiments
