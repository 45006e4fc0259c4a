#pragma once
// The English prose the cross-family maps of the stitch study are fitted on, and the held-out
// text its perplexity is measured on (protocols.md §A.11 uses WikiText chunks; WikiText is
// not available offline, so hylens reads a Debian package instead).
//
// Default source: the Debian Policy Manual as plain text, /usr/share/doc/debian-policy/
// policy.txt.gz of the Debian package `debian-policy` (GPL-2+; 4.6.2.0 in Debian 12:
// 479,229 bytes of text). Any other plain-text file (optionally gzip-compressed) can be given;
// the same cleaning applies.
//
// Cleaning, deterministic and in file order:
//   1. the text is split into paragraphs at blank lines;
//   2. a paragraph is kept only when every line starts at column 0 (no code block, no list
//      continuation, no table of contents), its first character is an ASCII letter, it is no
//      list item ("* ", "- "), no heading underline (a line of only = * - ~ ^ #) occurs in it,
//      and it ends with '.', '?' or '!' (optionally followed by a closing quote or bracket);
//   3. its lines are joined with single spaces; footnote marks " [n]" are removed; runs of
//      spaces become one space; ’ ‘ become ', “ ” become ", – — become -, … becomes ...;
//   4. a paragraph still holding a character outside printable ASCII, or shorter than
//      `min_chars` (80), is dropped;
//   5. a paragraph equal to an earlier kept one is dropped (the manual repeats a few).
// Chunks (documents) are runs of consecutive kept paragraphs joined by "\n", each at least
// `chunk_chars` long (a last shorter run is dropped). Chunk k is held out (perplexity) when
// k % holdout_every == holdout_every - 1, and is a fit chunk otherwise.

#include <cstddef>      // std::size_t
#include <filesystem>   // std::filesystem
#include <set>          // std::set
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <zlib.h>  // gzopen, gzread (reads plain files too)

#include "hylens/core/error.hpp"

namespace hylens::tasks::lookup {

/// The Debian package and file of the default fit corpus.
inline constexpr std::string_view fit_corpus_package = "debian-policy";
inline constexpr std::string_view fit_corpus_default_path = "/usr/share/doc/debian-policy/policy.txt.gz";

struct FitCorpusOptions {
    std::size_t min_chars = 80;      ///< shortest paragraph kept
    std::size_t chunk_chars = 600;   ///< shortest chunk
    std::size_t holdout_every = 5;   ///< every 5th chunk is held out
};

struct FitCorpus {
    std::string source;                   ///< the file read
    std::size_t bytes = 0;                ///< its decompressed size
    std::vector<std::string> paragraphs;  ///< the cleaned paragraphs, in file order
    std::vector<std::string> fit;         ///< fit chunks, in file order
    std::vector<std::string> held_out;    ///< held-out chunks, in file order
};

namespace detail {

/// The whole (gzip-decompressed when compressed) text of `path`.
inline std::string read_maybe_gzip(const std::filesystem::path& path) {
    // A FIFO blocked the read forever, a device (/dev/zero) read until memory ran out.
    check<FormatError>(!std::filesystem::exists(path) || std::filesystem::is_regular_file(path), "[fit_corpus] ", path.string(),
                       " is not a regular file (a folder, a pipe or a device?)");
    gzFile f = gzopen(path.c_str(), "rb");
    check<FormatError>(f != nullptr, "[fit_corpus] cannot open ", path.string());
    std::string out;
    char buf[1 << 16];
    for (;;) {
        const int n = gzread(f, buf, sizeof buf);
        if (n < 0) {
            int err = 0;
            const std::string msg = gzerror(f, &err);
            gzclose(f);
            fail<FormatError>("[fit_corpus] ", path.string(), " is not readable gzip or text: ", msg);
        }
        if (n == 0) {
            // The end of the data, or of a cut-off gzip stream (Z_BUF_ERROR: "unexpected end of
            // file"), which read as a shorter corpus without a word.
            int err = 0;
            const std::string msg = gzerror(f, &err);
            gzclose(f);
            check<FormatError>(err == Z_OK, "[fit_corpus] ", path.string(), " ends before its gzip stream does (", msg,
                               "): the file is cut off");
            return out;
        }
        out.append(buf, static_cast<std::size_t>(n));
    }
}

inline bool heading_rule(std::string_view line) {
    if (line.empty()) return false;
    for (char c : line)
        if (c != '=' && c != '*' && c != '-' && c != '~' && c != '^' && c != '#') return false;
    return true;
}

inline void replace_all(std::string& s, std::string_view from, std::string_view to) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

/// The cleaned paragraph of `lines` (step 2-4), or "" when it is dropped.
inline std::string clean_paragraph(const std::vector<std::string_view>& lines, std::size_t min_chars) {
    if (lines.empty()) return {};
    for (std::string_view l : lines)
        if (l.front() == ' ' || l.front() == '\t' || heading_rule(l)) return {};
    const char c0 = lines.front().front();
    if (!((c0 >= 'A' && c0 <= 'Z') || (c0 >= 'a' && c0 <= 'z'))) return {};
    std::string s;
    for (std::string_view l : lines) {
        if (!s.empty()) s += ' ';
        s += l;
    }
    // Footnote marks " [12]".
    for (std::size_t p = s.find('['); p != std::string::npos; p = s.find('[', p)) {
        std::size_t e = p + 1;
        while (e < s.size() && s[e] >= '0' && s[e] <= '9') ++e;
        if (e > p + 1 && e < s.size() && s[e] == ']') {
            std::size_t b = p;
            while (b > 0 && s[b - 1] == ' ') --b;
            s.erase(b, e + 1 - b);
            p = b;
        } else {
            ++p;
        }
    }
    replace_all(s, "\u2019", "'");
    replace_all(s, "\u2018", "'");
    replace_all(s, "\u201c", "\"");
    replace_all(s, "\u201d", "\"");
    replace_all(s, "\u2013", "-");
    replace_all(s, "\u2014", "-");
    replace_all(s, "\u2026", "...");
    std::string t;
    for (char c : s) {
        if (c == '\t' || c == '\r') c = ' ';
        if (c == ' ' && (t.empty() || t.back() == ' ')) continue;
        t += c;
    }
    while (!t.empty() && t.back() == ' ') t.pop_back();
    for (char c : t)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return {};
    if (t.size() < min_chars) return {};
    std::size_t end = t.size();
    while (end > 0 && (t[end - 1] == '"' || t[end - 1] == '\'' || t[end - 1] == ')')) --end;
    if (end == 0 || (t[end - 1] != '.' && t[end - 1] != '?' && t[end - 1] != '!')) return {};
    if (t.rfind("* ", 0) == 0 || t.rfind("- ", 0) == 0) return {};
    return t;
}

}  // namespace detail

/// The cleaned paragraphs of a text (steps 1-4 above).
inline std::vector<std::string> corpus_paragraphs(std::string_view text, std::size_t min_chars = 80) {
    std::vector<std::string> out;
    std::vector<std::string_view> lines;
    std::set<std::string> seen;
    const auto flush = [&] {
        std::string p = detail::clean_paragraph(lines, min_chars);
        if (!p.empty() && seen.insert(p).second) out.push_back(std::move(p));
        lines.clear();
    };
    for (std::size_t b = 0; b <= text.size();) {
        std::size_t e = text.find('\n', b);
        if (e == std::string_view::npos) e = text.size();
        std::string_view line = text.substr(b, e - b);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos)
            flush();
        else
            lines.push_back(line);
        b = e + 1;
    }
    flush();
    return out;
}

/// Chunks of consecutive paragraphs, split into fit and held-out chunks (see the top).
inline FitCorpus make_fit_corpus(std::vector<std::string> paragraphs, const FitCorpusOptions& opt = {}) {
    check(opt.chunk_chars >= 1 && opt.holdout_every >= 2, "[fit_corpus] chunk_chars must be >= 1 and holdout_every >= 2");
    FitCorpus c;
    c.paragraphs = std::move(paragraphs);
    std::string chunk;
    std::size_t k = 0;
    for (const std::string& p : c.paragraphs) {
        if (!chunk.empty()) chunk += '\n';
        chunk += p;
        if (chunk.size() >= opt.chunk_chars) {
            (k % opt.holdout_every == opt.holdout_every - 1 ? c.held_out : c.fit).push_back(std::move(chunk));
            chunk.clear();
            ++k;
        }
    }
    return c;
}

/// Reads and cleans a corpus file (default: the Debian Policy Manual of `debian-policy`).
/// The held-out chunks as one text, joined by "\n" (the circuit study's long-variant filler).
inline std::string held_out_text(const FitCorpus& c) {
    std::string out;
    for (const std::string& chunk : c.held_out) out += (out.empty() ? "" : "\n") + chunk;
    return out;
}

inline FitCorpus read_fit_corpus(const std::filesystem::path& path = std::filesystem::path(fit_corpus_default_path),
                                 const FitCorpusOptions& opt = {}) {
    if (!std::filesystem::exists(path)) {
        if (path == std::filesystem::path(fit_corpus_default_path))
            fail<FormatError>("[fit_corpus] ", path.string(), " does not exist: install the Debian package '",
                              fit_corpus_package, "' (apt-get install ", fit_corpus_package,
                              ", or scripts/install-deps.sh), or pass another English text file with --corpus FILE");
        fail<FormatError>("[fit_corpus] ", path.string(), " does not exist");
    }
    const std::string text = detail::read_maybe_gzip(path);
    FitCorpus c = make_fit_corpus(corpus_paragraphs(text, opt.min_chars), opt);
    c.source = path.string();
    c.bytes = text.size();
    check<FormatError>(!c.fit.empty() && !c.held_out.empty(), "[fit_corpus] ", path.string(), " gives ", c.fit.size(),
                       " fit chunks and ", c.held_out.size(), " held-out chunks of running English text after cleaning "
                       "(paragraphs at column 0 ending in a full stop); it needs at least one of each");
    return c;
}

}  // namespace hylens::tasks::lookup
