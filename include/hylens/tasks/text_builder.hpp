#pragma once
// Builds an item's text piece by piece and records the character span (Unicode code points)
// of each named piece, so spans can never drift from the text they name.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/item.hpp"
#include "hylens/text/unicode.hpp"

namespace hylens::tasks {

class TextBuilder {
public:
    /// `in` names the text the spans refer to: "context", "query" or "alt_context".
    TextBuilder(std::string in, std::vector<TextSpan>& spans) : in_(std::move(in)), spans_(&spans) {}

    /// Appends text that is no named part.
    TextBuilder& add(std::string_view s) {
        text_ += s;
        chars_ += text::count_chars(s);
        return *this;
    }
    /// Appends text and records it as the span `name`.
    TextBuilder& add(std::string_view name, std::string_view s) {
        const std::size_t begin = chars_;
        add(s);
        spans_->push_back({std::string(name), in_, begin, chars_});
        return *this;
    }
    /// The current position in characters (to open a span over several pieces).
    std::size_t mark() const noexcept { return chars_; }
    /// Records [begin, current position) as the span `name`.
    TextBuilder& close(std::string_view name, std::size_t begin) {
        spans_->push_back({std::string(name), in_, begin, chars_});
        return *this;
    }
    const std::string& str() const noexcept { return text_; }

private:
    std::string in_;
    std::vector<TextSpan>* spans_;
    std::string text_;
    std::size_t chars_ = 0;
};

/// An empty item of `task` with its seed and index set.
inline Item new_item(std::string task, std::uint64_t seed, std::size_t index) {
    Item item;
    item.task = std::move(task);
    item.seed = seed;
    item.index = index;
    return item;
}

/// The text a span names (code points [begin, end) of the item text it is in).
inline std::string span_text(const Item& item, const TextSpan& span) {
    const std::string* src = span.in == "context"       ? &item.context
                             : span.in == "query"       ? &item.query
                             : span.in == "alt_context" ? &item.alt_context
                                                        : nullptr;
    check(src != nullptr, "[span_text] span '", span.name, "' is in unknown text '", span.in, "'");
    const std::vector<char32_t> cps = text::to_code_points(*src);
    check<ShapeError>(span.begin <= span.end && span.end <= cps.size(), "[span_text] span '", span.name, "' [",
                      span.begin, ", ", span.end, ") outside the ", span.in, " (", cps.size(), " characters)");
    std::string out;
    for (std::size_t i = span.begin; i < span.end; ++i) text::append_utf8(out, cps[i]);
    return out;
}

/// The first span named `name` in `in`, or nullptr.
inline const TextSpan* find_span(const Item& item, std::string_view name, std::string_view in = "context") {
    for (const TextSpan& s : item.spans)
        if (s.name == name && s.in == in) return &s;
    return nullptr;
}

}  // namespace hylens::tasks
