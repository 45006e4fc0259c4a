#pragma once
// SafetensorsWriter: collects tensors in memory and writes one valid .safetensors file
// (activations, caches, converted checkpoints, test fixtures).
//
// Layout written: [u64 N][JSON header, space-padded so the data area starts at a multiple of
// 64 bytes][tensors, back to back]. The format forbids holes between tensors, so alignment
// comes from the order instead of padding: tensors are grouped by element size, largest first
// (8-byte, then 4, 2, 1), so every tensor starts at a multiple of its own element size and
// F32/BF16 tensors can be used in place after mmap. Within a group the order is insertion
// order (default) or by name. The file is written to "<path>.partial" and renamed into place,
// so a reader never sees a half-written file.

#include <algorithm>    // std::stable_sort
#include <cerrno>       // errno
#include <cstddef>      // std::byte, std::size_t
#include <cstdint>      // std::uint64_t, std::int64_t
#include <cstdio>       // std::snprintf, std::rename
#include <cstring>      // std::memcpy, std::strerror
#include <filesystem>   // std::filesystem::path
#include <fstream>      // std::ofstream
#include <map>          // std::map
#include <set>          // std::set
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "../core/bf16.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/tensor.hpp"  // shape_string

namespace hylens::io {

namespace detail {

/// Strict UTF-8 check (no overlong forms, no surrogates, nothing above U+10FFFF): the same set
/// a JSON reader accepts, so a name we write can always be read back.
inline bool valid_utf8(std::string_view s) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* end = p + s.size();
    while (p < end) {
        const unsigned c = *p;
        std::size_t len;
        unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
        if (c < 0x80) {
            ++p;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0;  // overlong
            if (c == 0xed) hi = 0x9f;  // surrogates
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90;  // overlong
            if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
        } else {
            return false;
        }
        if (static_cast<std::size_t>(end - p) < len) return false;
        if (p[1] < lo || p[1] > hi) return false;
        for (std::size_t i = 2; i < len; ++i)
            if (p[i] < 0x80 || p[i] > 0xbf) return false;
        p += len;
    }
    return true;
}

/// Appends s as a JSON string literal (s must be valid UTF-8).
inline void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    out += '"';
}

}  // namespace detail

class SafetensorsWriter {
public:
    /// Order of tensors within one element-size group (see the top of this header).
    enum class Order { insertion, by_name };

    explicit SafetensorsWriter(Order order = Order::insertion) : order_(order) {}

    /// Adds a tensor from raw little-endian bytes. Throws ShapeError if data.size() is not
    /// dtype_size x product(shape), FormatError for a duplicate, reserved or non-UTF-8 name.
    void add(std::string name, DType dtype, std::vector<std::size_t> shape, std::span<const std::byte> data) {
        add(std::move(name), dtype, std::move(shape), std::vector<std::byte>(data.begin(), data.end()));
    }
    /// As above, taking ownership of the bytes (no copy of a large tensor).
    void add(std::string name, DType dtype, std::vector<std::size_t> shape, std::vector<std::byte>&& data) {
        check<FormatError>(name != "__metadata__", "[safetensors writer] the tensor name '__metadata__' is reserved");
        check<FormatError>(detail::valid_utf8(name), "[safetensors writer] tensor name '", name, "' is not valid UTF-8");
        check<FormatError>(names_.count(name) == 0, "[safetensors writer] tensor '", name, "' added twice");
        std::size_t n = 1;
        bool overflow = false;
        for (auto d : shape) overflow |= __builtin_mul_overflow(n, d, &n);
        std::size_t nbytes = 0;
        overflow |= __builtin_mul_overflow(n, dtype_size(dtype), &nbytes);
        check<ShapeError>(!overflow, "[safetensors writer] tensor '", name, "': the size of shape ", shape_string(shape),
                          " overflows");
        check<ShapeError>(nbytes == data.size(), "[safetensors writer] tensor '", name, "': ", dtype_name(dtype), " x ",
                          shape_string(shape), " needs ", nbytes, " bytes, got ", data.size());
        names_.insert(name);
        entries_.push_back(Entry{std::move(name), dtype, std::move(shape), std::move(data)});
    }

    void add_f32(std::string name, std::vector<std::size_t> shape, std::span<const float> values) {
        add(std::move(name), DType::F32, std::move(shape), std::as_bytes(values));
    }
    /// Rounds each value to bf16 (nearest, ties to even).
    void add_bf16(std::string name, std::vector<std::size_t> shape, std::span<const float> values) {
        std::vector<std::byte> bytes(values.size() * 2);
        for (std::size_t i = 0; i < values.size(); ++i) {
            const std::uint16_t b = to_bf16(values[i]).bits;
            std::memcpy(bytes.data() + 2 * i, &b, 2);
        }
        add(std::move(name), DType::BF16, std::move(shape), std::move(bytes));
    }
    /// Rounds each value to IEEE half (nearest, ties to even).
    void add_f16(std::string name, std::vector<std::size_t> shape, std::span<const float> values) {
        std::vector<std::byte> bytes(values.size() * 2);
        for (std::size_t i = 0; i < values.size(); ++i) {
            const std::uint16_t b = to_f16(values[i]).bits;
            std::memcpy(bytes.data() + 2 * i, &b, 2);
        }
        add(std::move(name), DType::F16, std::move(shape), std::move(bytes));
    }
    void add_i64(std::string name, std::vector<std::size_t> shape, std::span<const std::int64_t> values) {
        add(std::move(name), DType::I64, std::move(shape), std::as_bytes(values));
    }

    /// Sets "__metadata__"[key] = value (both must be valid UTF-8).
    void set_metadata(std::string key, std::string value) {
        check<FormatError>(detail::valid_utf8(key) && detail::valid_utf8(value), "[safetensors writer] metadata '", key,
                           "' is not valid UTF-8");
        metadata_[std::move(key)] = std::move(value);
    }

    std::size_t size() const noexcept { return entries_.size(); }
    bool contains(std::string_view name) const { return names_.count(std::string(name)) != 0; }

    /// The header bytes that write() puts after the 8-byte length, padding included, and the
    /// tensors in the order they are written (their data offsets follow from it).
    std::string header() const {
        std::string h = "{";
        if (!metadata_.empty()) {
            h += "\"__metadata__\":{";
            bool first = true;
            for (const auto& [k, v] : metadata_) {
                if (!first) h += ',';
                first = false;
                detail::append_json_string(h, k);
                h += ':';
                detail::append_json_string(h, v);
            }
            h += '}';
        }
        std::size_t offset = 0;
        for (const Entry* e : layout()) {
            if (h.size() > 1) h += ',';
            detail::append_json_string(h, e->name);
            h += ":{\"dtype\":\"";
            h += dtype_name(e->dtype);
            h += "\",\"shape\":[";
            for (std::size_t i = 0; i < e->shape.size(); ++i) {
                if (i) h += ',';
                h += std::to_string(e->shape[i]);
            }
            h += "],\"data_offsets\":[" + std::to_string(offset) + ',' + std::to_string(offset + e->data.size()) + "]}";
            offset += e->data.size();
        }
        h += '}';
        // Trailing spaces are valid JSON whitespace; they put the data area on a 64-byte boundary.
        while ((8 + h.size()) % 64 != 0) h += ' ';
        return h;
    }

    /// Writes the file. FormatError naming the path on any I/O failure.
    void write(const std::filesystem::path& path) const {
        const std::string h = header();
        const std::filesystem::path tmp = path.string() + ".partial";
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out) fail<FormatError>("[safetensors writer] ", path.string(), ": cannot create ", tmp.string(), ": ", std::strerror(errno));
            const std::uint64_t n = h.size();
            unsigned char len[8];
            for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little-endian
            out.write(reinterpret_cast<const char*>(len), 8);
            out.write(h.data(), static_cast<std::streamsize>(h.size()));
            for (const Entry* e : layout())
                out.write(reinterpret_cast<const char*>(e->data.data()), static_cast<std::streamsize>(e->data.size()));
            out.close();
            if (!out) {
                std::error_code ec;
                std::filesystem::remove(tmp, ec);
                fail<FormatError>("[safetensors writer] ", path.string(), ": write failed (disk full?)");
            }
        }
        std::error_code ec;
        std::filesystem::rename(tmp, path, ec);
        if (ec) {
            const std::string why = ec.message();  // before remove() overwrites ec
            std::filesystem::remove(tmp, ec);
            fail<FormatError>("[safetensors writer] ", path.string(), ": cannot move the written file into place: ", why);
        }
    }

private:
    struct Entry {
        std::string name;
        DType dtype;
        std::vector<std::size_t> shape;
        std::vector<std::byte> data;
    };

    std::vector<const Entry*> layout() const {
        std::vector<const Entry*> order;
        order.reserve(entries_.size());
        for (const auto& e : entries_) order.push_back(&e);
        std::stable_sort(order.begin(), order.end(), [this](const Entry* a, const Entry* b) {
            const std::size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
            if (sa != sb) return sa > sb;
            return order_ == Order::by_name && a->name < b->name;
        });
        return order;
    }

    Order order_;
    std::vector<Entry> entries_;
    std::set<std::string> names_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace hylens::io
