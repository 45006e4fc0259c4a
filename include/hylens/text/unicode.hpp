// SPDX-License-Identifier: Apache-2.0
// Unicode helpers for the tokenizer: UTF-8 decoding with U+FFFD repair, character classes from
// utf8proc, Unicode normalization forms through utf8proc, and a PCRE2 regex (UTF + UCP) wrapper.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t
#include <cstdlib>      // std::free
#include <memory>       // std::unique_ptr
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include <pcre2.h>     // pcre2_compile, pcre2_match, pcre2_jit_*
#include <utf8proc.h>  // utf8proc_category, utf8proc_map, utf8proc_get_property

#include "hylens/core/error.hpp"

namespace hylens::text {

/// U+FFFD REPLACEMENT CHARACTER, which replaces every invalid UTF-8 subsequence.
inline constexpr char32_t kReplacementChar = 0xFFFD;

/// Byte length of the UTF-8 sequence whose lead byte is `lead` (1 for invalid leads).
constexpr std::size_t utf8_length(unsigned char lead) noexcept {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/// True for bytes that start a character (not 10xxxxxx continuation bytes).
constexpr bool is_lead_byte(unsigned char b) noexcept { return (b & 0xC0) != 0x80; }

/// Decodes one character of valid or invalid UTF-8 at s[pos] and advances pos. An invalid
/// sequence yields U+FFFD and consumes its *maximal subpart* (Unicode §3.9, the WHATWG
/// Encoding Standard's decoder): a lead byte plus the continuation bytes that were valid for
/// it, or a single byte. This is exactly what a JavaScript TextDecoder or Python's
/// `bytes.decode("utf-8", "replace")` do, so offsets agree with those tools.
inline char32_t decode_utf8(std::string_view s, std::size_t& pos) noexcept {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char b0 = byte(pos);
    if (b0 < 0x80) {
        ++pos;
        return b0;
    }
    std::size_t need = 0;
    char32_t cp = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2, cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;  // no overlongs
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3, cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;  // no overlongs
        if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        ++pos;
        return kReplacementChar;
    }
    std::size_t i = pos + 1;
    for (std::size_t k = 0; k < need; ++k, ++i) {
        if (i >= s.size()) {
            pos = i;
            return kReplacementChar;
        }
        const unsigned char b = byte(i);
        const unsigned char l = k == 0 ? lo : 0x80, h = k == 0 ? hi : 0xBF;
        if (b < l || b > h) {
            pos = i;  // the offending byte starts the next character
            return kReplacementChar;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    pos = i;
    return cp;
}

/// Appends the UTF-8 encoding of cp to out.
inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

/// Byte length of cp in UTF-8.
constexpr std::size_t utf8_size(char32_t cp) noexcept {
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/// True if s is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view s) noexcept {
    std::size_t pos = 0;
    while (pos < s.size()) {
        if (static_cast<unsigned char>(s[pos]) < 0x80) {
            ++pos;
            continue;
        }
        const std::size_t start = pos;
        if (decode_utf8(s, pos) == kReplacementChar &&
            s.substr(start, pos - start) != "\xEF\xBF\xBD")
            return false;
    }
    return true;
}

/// Returns s with every maximal invalid subsequence replaced by U+FFFD (see decode_utf8).
inline std::string repair_utf8(std::string_view s) {
    if (is_valid_utf8(s)) return std::string(s);
    std::string out;
    out.reserve(s.size() + 8);
    std::size_t pos = 0;
    while (pos < s.size()) append_utf8(out, decode_utf8(s, pos));
    return out;
}

/// Decodes valid UTF-8 into code points.
inline std::vector<char32_t> to_code_points(std::string_view s) {
    std::vector<char32_t> cps;
    cps.reserve(s.size());
    std::size_t pos = 0;
    while (pos < s.size()) cps.push_back(decode_utf8(s, pos));
    return cps;
}

/// Number of characters (code points) of valid UTF-8.
inline std::size_t count_chars(std::string_view s) noexcept {
    std::size_t n = 0;
    for (const char c : s) n += is_lead_byte(static_cast<unsigned char>(c));
    return n;
}

// --- Character classes (utf8proc's Unicode tables) --------------------------------------

/// General category of cp (utf8proc's UTF8PROC_CATEGORY_*).
inline utf8proc_category_t category(char32_t cp) noexcept {
    return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

/// Unicode White_Space, the set Rust's char::is_whitespace and regex `\s` use: the separators
/// (Zs, Zl, Zp), TAB..CR and NEL.
inline bool is_whitespace(char32_t cp) noexcept {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    if (cp == 0x85) return true;
    const auto c = category(cp);
    return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

/// A word character in the sense of Rust regex `\w`: letters, marks, decimal digits, letter
/// numbers, connector punctuation and the joiners (ZWNJ, ZWJ).
inline bool is_word_char(char32_t cp) noexcept {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    if (cp == 0x200C || cp == 0x200D) return true;
    switch (category(cp)) {
        case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
            return true;
        default:
            return false;
    }
}

/// Punctuation as the Punctuation pre-tokenizer sees it: ASCII punctuation or category P*.
inline bool is_punctuation(char32_t cp) noexcept {
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    switch (category(cp)) {
        case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
        case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
        case UTF8PROC_CATEGORY_PO:
            return true;
        default:
            return false;
    }
}

/// Rust's char::is_numeric: categories Nd, Nl, No.
inline bool is_numeric(char32_t cp) noexcept {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    const auto c = category(cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

// --- Normalization forms ------------------------------------------------------------------

enum class NormalForm { nfc, nfd, nfkc, nfkd };

/// Applies a Unicode normalization form to valid UTF-8 (utf8proc_map).
inline std::string normalize_form(std::string_view s, NormalForm form) {
    int flags = UTF8PROC_STABLE;
    switch (form) {
        case NormalForm::nfc: flags |= UTF8PROC_COMPOSE; break;
        case NormalForm::nfd: flags |= UTF8PROC_DECOMPOSE; break;
        case NormalForm::nfkc: flags |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        case NormalForm::nfkd: flags |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                     &out, static_cast<utf8proc_option_t>(flags));
    if (n < 0) fail<FormatError>("[unicode normalize] utf8proc failed: ", utf8proc_errmsg(n));
    std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
    std::free(out);
    return result;
}

/// True if cp is the second character of some canonical composition pair (utf8proc 2.x marks
/// these with comb_index >= 0x8000; 0xFFFF means "in no composition").
inline bool is_composable_second(char32_t cp) noexcept {
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    return p->comb_index != 0xFFFF && p->comb_index >= 0x8000;
}

// --- PCRE2 regex ----------------------------------------------------------------------------

namespace detail {
struct Pcre2MatchDeleter {
    void operator()(pcre2_match_data* m) const noexcept { pcre2_match_data_free(m); }
};
struct Pcre2ContextDeleter {
    void operator()(pcre2_match_context* m) const noexcept { pcre2_match_context_free(m); }
};
struct Pcre2StackDeleter {
    void operator()(pcre2_jit_stack* s) const noexcept { pcre2_jit_stack_free(s); }
};

/// Per-thread match state: one match-data block (only group 0 is read) and a JIT stack large
/// enough for patterns such as `\s+(?!\S)` over long whitespace runs.
struct Pcre2ThreadState {
    std::unique_ptr<pcre2_match_data, Pcre2MatchDeleter> data{pcre2_match_data_create(1, nullptr)};
    std::unique_ptr<pcre2_jit_stack, Pcre2StackDeleter> stack{pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr)};
    std::unique_ptr<pcre2_match_context, Pcre2ContextDeleter> context{pcre2_match_context_create(nullptr)};
    Pcre2ThreadState() { pcre2_jit_stack_assign(context.get(), nullptr, stack.get()); }
};
inline Pcre2ThreadState& pcre2_thread_state() {
    thread_local Pcre2ThreadState state;
    return state;
}
}  // namespace detail

/// Rewrites the Oniguruma shorthands whose Unicode meaning differs in PCRE2 into explicit
/// property classes: `\s` is White_Space in Oniguruma (PCRE2 also counts U+180E), `\w` is
/// L, M, N, Pc (PCRE2 10.42 leaves out marks). Inside a bracket class `\s` and `\w` expand in
/// place; a negated `\S` or `\W` inside a class is left to PCRE2 (no tokenizer uses one).
inline std::string translate_oniguruma(std::string_view p) {
    static constexpr std::string_view space = R"(\p{Zs}\p{Zl}\p{Zp}\t-\r\x{85})";
    static constexpr std::string_view word = R"(\p{L}\p{M}\p{N}\p{Pc})";
    std::string out;
    out.reserve(p.size() + 32);
    int depth = 0;  // bracket-class nesting
    for (std::size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            const char n = p[++i];
            if (n == 's' || n == 'w') {
                const std::string_view set = n == 's' ? space : word;
                if (depth > 0) out.append(set);
                else out.append("[").append(set).append("]");
            } else if ((n == 'S' || n == 'W') && depth == 0) {
                out.append("[^").append(n == 'S' ? space : word).append("]");
            } else {
                out.push_back('\\');
                out.push_back(n);
            }
            continue;
        }
        if (c == '[') {
            if (depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:name:]
                const std::size_t close = p.find(":]", i + 2);
                if (close != std::string_view::npos) {
                    out.append(p.substr(i, close + 2 - i));
                    i = close + 1;
                    continue;
                }
            }
            ++depth;
            out.push_back(c);
            // A ']' right after '[' or '[^' is a literal member.
            if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
            if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
            continue;
        }
        if (c == ']' && depth > 0) --depth;
        out.push_back(c);
    }
    return out;
}

/// A compiled PCRE2 pattern in UTF and UCP mode (so `\s`, `\w`, `\p{L}` and case folding
/// follow Unicode), JIT-compiled when the platform allows. Patterns from tokenizer.json are
/// written for Oniguruma; the constructs those files use (`\p{..}`, `(?i:..)`, look-ahead,
/// classes, counted repeats) mean the same in PCRE2. Matching is thread-safe.
class Regex {
public:
    Regex() = default;

    /// Compiles pattern; with literal = true the text is matched as is (no metacharacters).
    explicit Regex(std::string_view pattern, bool literal = false) : pattern_(pattern) {
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        std::uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
        if (literal) options = (options & ~std::uint32_t{PCRE2_UCP}) | PCRE2_LITERAL;  // LITERAL rejects UCP
        check<FormatError>(is_valid_utf8(pattern), "[regex] pattern is not valid UTF-8");
        const std::string source = literal ? std::string(pattern) : translate_oniguruma(pattern);
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options,
                                         &err, &err_offset, nullptr);
        if (code == nullptr) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail<FormatError>("[regex] cannot compile pattern '", pattern_, "' at offset ", err_offset, ": ",
                              reinterpret_cast<const char*>(msg));
        }
        code_.reset(code, pcre2_code_free);
        // JIT is an optimisation only: without it pcre2_match interprets the pattern.
        (void)pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
    }

    const std::string& pattern() const noexcept { return pattern_; }
    bool empty() const noexcept { return code_ == nullptr; }

    /// All non-overlapping matches in valid UTF-8 `s`, left to right, as byte ranges. After an
    /// empty match the search resumes one character later (Oniguruma's find_iter behaviour).
    std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const {
        std::vector<std::pair<std::size_t, std::size_t>> out;
        for_each_match(s, [&](std::size_t b, std::size_t e) { out.emplace_back(b, e); });
        return out;
    }

    /// Calls fn(begin, end) for each match of find_all, without building a vector.
    template <class Fn>
    void for_each_match(std::string_view s, Fn&& fn) const {
        if (!code_) return;
        auto& st = detail::pcre2_thread_state();
        std::size_t start = 0;
        while (start <= s.size()) {
            const int rc = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                                       PCRE2_NO_UTF_CHECK, st.data.get(), st.context.get());
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                fail<Error>("[regex] matching '", pattern_, "' failed on a ", s.size(),
                            "-byte input: ", reinterpret_cast<const char*>(msg));
            }
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data.get());
            const std::size_t b = ov[0], e = ov[1];
            fn(b, e);
            if (e > b) {
                start = e;
            } else {  // empty match: step over one character
                if (e >= s.size()) break;
                start = e + utf8_length(static_cast<unsigned char>(s[e]));
            }
        }
    }

private:
    std::string pattern_;
    std::shared_ptr<pcre2_code> code_;  // shared: a compiled pattern is immutable
};

}  // namespace hylens::text
