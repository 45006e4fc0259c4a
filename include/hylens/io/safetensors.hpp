#pragma once
// SafetensorsFile: one .safetensors file, memory-mapped read-only and validated in full before
// any tensor is handed out.
//
// Format (https://github.com/huggingface/safetensors, README "Format"):
//   [u64 little-endian N][N bytes of UTF-8 JSON header][data area]
//   header = { "<name>": {"dtype": "BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
//              ..., "__metadata__": {"key": "value", ...} (optional) }
//   begin/end are byte offsets from the start of the data area (file offset 8 + N).
// Every number in the file is untrusted: header length, shapes, offsets and their products are
// checked (with overflow checks) before a pointer into the data is formed. Any defect is a
// FormatError whose message names the file and, where there is one, the tensor.
//
// Weights of dtype F32 and BF16 are returned as views into the mapping (zero-copy); the
// Weight holds a shared_ptr to the mapping, so it may outlive this object.

#include <algorithm>    // std::sort, std::min
#include <bit>          // std::bit_cast
#include <cmath>        // std::ldexp, std::numeric_limits
#include <cstddef>      // std::byte, std::size_t
#include <cstdint>      // std::uint64_t, std::int64_t, std::uintptr_t
#include <cstring>      // std::memcpy
#include <filesystem>   // std::filesystem::path
#include <limits>       // std::numeric_limits
#include <map>          // std::map
#include <memory>       // std::shared_ptr
#include <set>          // std::set
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include <nlohmann/json.hpp>  // nlohmann::json::sax_parse (SAX pass only; no DOM is built)

#include "../core/bf16.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/tensor.hpp"  // shape_string
#include "../core/weight.hpp"
#include "json_error.hpp"
#include "mmap.hpp"

namespace hylens::io {

/// One tensor of a safetensors file, as validated from the header.
struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::size_t> shape;
    std::size_t offset = 0;  ///< byte offset from the start of the data area
    std::size_t nbytes = 0;  ///< = dtype_size(dtype) * product(shape)
};

namespace detail {

/// Header length limit. The reference implementation uses the same bound (100 MB); a real
/// header is ~100 bytes per tensor, so even a 100k-tensor checkpoint stays far below it.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

/// One header entry as the SAX pass saw it; checked against the file afterwards.
struct RawEntry {
    std::string name;
    std::string dtype;
    std::vector<std::uint64_t> shape;
    std::vector<std::uint64_t> offsets;
    bool has_dtype = false, has_shape = false, has_offsets = false;
};

/// A SAX handler for nlohmann::json::sax_parse that reads the safetensors header directly
/// into RawEntry records. Why SAX: a DOM parse silently keeps the last of two duplicate keys,
/// and we must reject duplicate tensor names; it also never builds a tree for a hostile header.
/// Any structural surprise stores a message in `error` and returns false, which stops the parse.
class HeaderSax {
public:
    using json = nlohmann::json;

    std::vector<RawEntry> entries;
    std::map<std::string, std::string> metadata;
    std::string error;  ///< empty while all is well

    bool finished() const noexcept { return state_ == State::done; }

    // --- nlohmann SAX interface -------------------------------------------------------------
    bool null() { return scalar("null"); }
    bool boolean(bool) { return scalar("a boolean"); }
    bool number_integer(json::number_integer_t v) {
        if (v >= 0) return number_unsigned(static_cast<json::number_unsigned_t>(v));
        return scalar("a negative integer");
    }
    bool number_unsigned(json::number_unsigned_t v) {
        if (state_ == State::shape_items) {
            cur_.shape.push_back(v);
            return true;
        }
        if (state_ == State::offsets_items) {
            if (cur_.offsets.size() == 2) return fail_entry("data_offsets must hold exactly two integers, got more");
            cur_.offsets.push_back(v);
            return true;
        }
        return scalar("an integer");
    }
    bool number_float(json::number_float_t, const std::string&) { return scalar("a non-integer number"); }
    bool string(std::string& s) {
        switch (state_) {
            case State::dtype_value:
                cur_.dtype = std::move(s);
                cur_.has_dtype = true;
                state_ = State::entry_key;
                return true;
            case State::meta_value:
                metadata.emplace(std::move(meta_key_), std::move(s));
                state_ = State::meta_key;
                return true;
            default: return scalar("a string");
        }
    }
    bool binary(json::binary_t&) { return scalar("binary data"); }

    bool start_object(std::size_t) {
        switch (state_) {
            case State::top: state_ = State::top_key; return true;
            case State::entry_value: state_ = State::entry_key; return true;
            case State::meta_object: state_ = State::meta_key; return true;
            case State::skip: ++skip_depth_; return true;
            default: return unexpected("an object");
        }
    }
    bool key(std::string& k) {
        switch (state_) {
            case State::top_key:
                if (!seen_.insert(k).second) {
                    if (k == "__metadata__") return fail("__metadata__ appears twice");
                    cur_.name = k;
                    return fail_entry("duplicate tensor name (the header lists it twice)");
                }
                if (k == "__metadata__") {
                    state_ = State::meta_object;
                } else {
                    cur_ = RawEntry{};
                    cur_.name = std::move(k);
                    state_ = State::entry_value;
                }
                return true;
            case State::entry_key:
                if (k == "dtype") return field(cur_.has_dtype, "dtype", State::dtype_value);
                if (k == "shape") return field(cur_.has_shape, "shape", State::shape_start);
                if (k == "data_offsets") return field(cur_.has_offsets, "data_offsets", State::offsets_start);
                state_ = State::skip;  // unknown fields are ignored, as the reference reader does
                skip_depth_ = 0;
                return true;
            case State::meta_key:
                if (metadata.count(k) != 0) return fail("__metadata__ lists key '", k, "' twice");
                meta_key_ = std::move(k);
                state_ = State::meta_value;
                return true;
            case State::skip: return true;
            default: return fail("unexpected key '", k, "'");
        }
    }
    bool end_object() {
        switch (state_) {
            case State::top_key: state_ = State::done; return true;
            case State::meta_key: state_ = State::top_key; return true;
            case State::entry_key:
                if (!cur_.has_dtype) return fail_entry("missing \"dtype\"");
                if (!cur_.has_shape) return fail_entry("missing \"shape\"");
                if (!cur_.has_offsets) return fail_entry("missing \"data_offsets\"");
                entries.push_back(std::move(cur_));
                cur_ = RawEntry{};
                state_ = State::top_key;
                return true;
            case State::skip: return close_skip();
            default: return fail("unexpected end of object");
        }
    }
    bool start_array(std::size_t) {
        switch (state_) {
            case State::shape_start:
                cur_.has_shape = true;
                state_ = State::shape_items;
                return true;
            case State::offsets_start:
                cur_.has_offsets = true;
                state_ = State::offsets_items;
                return true;
            case State::skip: ++skip_depth_; return true;
            default: return unexpected("a list");
        }
    }
    bool end_array() {
        switch (state_) {
            case State::shape_items: state_ = State::entry_key; return true;
            case State::offsets_items:
                if (cur_.offsets.size() != 2)
                    return fail_entry("data_offsets must hold exactly two integers, got ", cur_.offsets.size());
                state_ = State::entry_key;
                return true;
            case State::skip: return close_skip();
            default: return fail("unexpected end of list");
        }
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
        return fail("header is not valid JSON (UTF-8) at header byte ", position, " (file byte ", position + 8,
                    "): ", json_error_reason(ex.what()));
    }

private:
    enum class State {
        top, top_key, entry_value, entry_key, dtype_value, shape_start, shape_items, offsets_start,
        offsets_items, meta_object, meta_key, meta_value, skip, done
    };

    template <class... Args>
    bool fail(Args&&... args) {
        if (error.empty()) error = hylens::detail::concat(std::forward<Args>(args)...);
        return false;
    }
    template <class... Args>
    bool fail_entry(Args&&... args) {
        return fail("tensor '", cur_.name, "': ", std::forward<Args>(args)...);
    }
    bool field(bool already, const char* name, State next) {
        if (already) return fail_entry("field \"", name, "\" appears twice");
        state_ = next;
        return true;
    }
    bool close_skip() {
        if (skip_depth_ == 0) return fail_entry("unbalanced value");
        if (--skip_depth_ == 0) state_ = State::entry_key;
        return true;
    }
    // A scalar (or an object/list, through unexpected) where the state wants something else.
    bool scalar(const char* got) {
        if (state_ == State::skip) {
            if (skip_depth_ == 0) state_ = State::entry_key;  // the ignored field was this scalar
            return true;
        }
        return unexpected(got);
    }
    bool unexpected(const char* got) {
        switch (state_) {
            case State::top: return fail("header is not a JSON object (got ", got, ")");
            case State::entry_value: return fail_entry("entry is not a JSON object (got ", got, ")");
            case State::dtype_value: return fail_entry("dtype must be a string, got ", got);
            case State::shape_start: return fail_entry("shape must be a list, got ", got);
            case State::shape_items: return fail_entry("shape must hold non-negative integers, got ", got);
            case State::offsets_start: return fail_entry("data_offsets must be a list, got ", got);
            case State::offsets_items: return fail_entry("data_offsets must hold non-negative integers, got ", got);
            case State::meta_object: return fail("__metadata__ must be an object, got ", got);
            case State::meta_value: return fail("__metadata__['", meta_key_, "'] must be a string, got ", got);
            default: return fail("unexpected ", got, " in the header");
        }
    }

    State state_ = State::top;
    std::size_t skip_depth_ = 0;
    RawEntry cur_;
    std::string meta_key_;
    std::set<std::string> seen_;
};

template <class T>
T load_le(const std::byte* p) noexcept {  // unaligned load; the data area has no alignment guarantee
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

/// float8 e4m3 "fn" (OCP FP8: bias 7, no infinities, S.1111.111 is NaN) to float32.
inline float f8_e4m3_to_f32(std::uint8_t b) noexcept {
    const float sign = (b & 0x80u) ? -1.0f : 1.0f;
    const int exp = (b >> 3) & 0xf;
    const int mant = b & 0x7;
    if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
    if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 * 2^-6
    return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
}

/// float8 e5m2 is the upper byte of an IEEE half.
inline float f8_e5m2_to_f32(std::uint8_t b) noexcept {
    return to_f32(f16{static_cast<std::uint16_t>(b << 8)});
}

inline bool is_float_dtype(DType t) noexcept {
    return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8_E4M3 ||
           t == DType::F8_E5M2;
}

}  // namespace detail

/// One memory-mapped .safetensors file, read-only. Cheap to copy (shared state).
class SafetensorsFile {
public:
    /// Maps (or, for Storage::in_memory, reads) and validates `path`. Throws FormatError
    /// (naming the file and the tensor) on any defect of the header or offsets; when mapped,
    /// never reads data before the whole header checks out.
    /// Read into memory, the file is placed so that as many tensor bytes as one placement allows
    /// start on a 64-byte cache line (cache_line_shift): the decode kernels read aligned rows
    /// faster (docs/performance-log.md, "Where a Granite F32 decode step goes, and misaligned short rows").
    static SafetensorsFile open(const std::filesystem::path& path, Storage storage = Storage::mapped) {
        std::size_t shift = 0;
        if (storage == Storage::in_memory) {
            const SafetensorsFile header = open(path, Storage::mapped);  // reads the header's pages only
            shift = cache_line_shift(header.s_->data_start, header.tensors());
        }
        auto map = MappedFile::open(path, storage, shift);
        const std::byte* base = map->data();
        const std::size_t size = map->size();
        std::shared_ptr<const void> owner(map, base);
        return SafetensorsFile(parse(path, base, size, std::move(owner), std::move(map)));
    }

    /// Validates an in-memory copy of a file's bytes (fuzzing, network buffers). `label` stands
    /// in for the path in messages.
    static SafetensorsFile from_memory(std::span<const std::byte> bytes, std::filesystem::path label = "<memory>") {
        auto buf = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
        const std::byte* base = buf->data();
        std::shared_ptr<const void> owner(buf, base);
        return SafetensorsFile(parse(label, base, buf->size(), std::move(owner), nullptr));
    }

    const std::filesystem::path& path() const noexcept { return s_->path; }

    /// Where to put a file's byte 0 past a page boundary (a multiple of 8 below 64, so 8-byte
    /// alignment within the file is kept) so that the most tensor bytes start on a 64-byte
    /// line: the byte-weighted vote over the tensors' starts (data_start + offset) modulo 64;
    /// the smallest shift on a tie. In a safetensors file the tensors follow each other, so
    /// those of sizes that are multiples of 64 bytes share one start modulo 64.
    static std::size_t cache_line_shift(std::size_t data_start, const std::vector<TensorInfo>& tensors) noexcept {
        std::size_t bytes[8] = {};
        for (const auto& t : tensors) {
            const std::size_t at = (data_start + t.offset) % 64;
            if (at % 8 == 0) bytes[((64 - at) % 64) / 8] += t.nbytes;
        }
        std::size_t best = 0;
        for (std::size_t c = 1; c < 8; ++c)
            if (bytes[c] > bytes[best]) best = c;
        return best * 8;
    }

    /// Tensor names in file order (by data offset; ties in header order).
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        out.reserve(s_->tensors.size());
        for (const auto& t : s_->tensors) out.push_back(t.name);
        return out;
    }
    std::size_t size() const noexcept { return s_->tensors.size(); }
    /// All tensors, in file order.
    const std::vector<TensorInfo>& tensors() const noexcept { return s_->tensors; }

    bool contains(std::string_view name) const { return s_->index.find(name) != s_->index.end(); }

    /// Throws FormatError naming the file and the tensor if absent.
    const TensorInfo& info(std::string_view name) const {
        auto it = s_->index.find(name);
        if (it == s_->index.end())
            fail<FormatError>("[safetensors] ", s_->path.string(), ": no tensor named '", name, "' (the file holds ",
                              s_->tensors.size(), " tensors)");
        return s_->tensors[it->second];
    }

    /// The "__metadata__" string map (empty when the header has none).
    const std::map<std::string, std::string>& metadata() const noexcept { return s_->metadata; }

    /// The tensor as a Weight. F32 and BF16 are views into the mapping (zero-copy, keeping it
    /// alive); F16, and F32/BF16 at a misaligned address, are converted/copied into an owned
    /// Weight (F32, or BF16 for BF16). Other dtypes: UnsupportedError naming file, tensor, dtype.
    Weight weight(std::string_view name) const {
        const TensorInfo& t = info(name);
        const std::byte* p = data(t);
        if (s_->map) s_->map->advise(s_->data_start + t.offset, t.nbytes, Advice::willneed);
        const auto addr = reinterpret_cast<std::uintptr_t>(p);
        switch (t.dtype) {
            case DType::F32:
                if (addr % alignof(float) == 0) return Weight(DType::F32, p, t.shape, s_->owner, t.name);
                return Weight::from_floats(read_f32(name), t.shape, t.name);
            case DType::BF16:
                if (addr % alignof(bf16) == 0) return Weight(DType::BF16, p, t.shape, s_->owner, t.name);
                {
                    // A header of odd length leaves the data misaligned; copy the bits as they are.
                    auto owned = std::make_shared<std::vector<bf16>>(t.nbytes / sizeof(bf16));
                    if (t.nbytes != 0) std::memcpy(owned->data(), p, t.nbytes);
                    const void* q = owned->data();
                    return Weight(DType::BF16, q, t.shape, std::shared_ptr<const void>(owned, q), t.name);
                }
            case DType::F16: return Weight::from_floats(read_f32(name), t.shape, t.name);
            default:
                fail<UnsupportedError>("[safetensors] ", s_->path.string(), ": tensor '", t.name, "': dtype ",
                                       dtype_name(t.dtype),
                                       " cannot be used as a weight (expected F32, BF16 or F16; see read_f32/read_i64)");
        }
    }

    /// The values of a floating-point tensor (F64, F32, F16, BF16, F8_E4M3, F8_E5M2) as float32.
    /// F64 is rounded to nearest; the others widen exactly. Integer dtypes: UnsupportedError.
    std::vector<float> read_f32(std::string_view name) const {
        const TensorInfo& t = info(name);
        const std::byte* p = data(t);
        const std::size_t n = t.nbytes / dtype_size(t.dtype);
        std::vector<float> out(n);
        switch (t.dtype) {
            case DType::F64:
                for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(detail::load_le<double>(p + 8 * i));
                break;
            case DType::F32:
                if (n != 0) std::memcpy(out.data(), p, t.nbytes);
                break;
            case DType::F16:
                for (std::size_t i = 0; i < n; ++i) out[i] = to_f32(f16{detail::load_le<std::uint16_t>(p + 2 * i)});
                break;
            case DType::BF16:
                for (std::size_t i = 0; i < n; ++i) out[i] = to_f32(bf16{detail::load_le<std::uint16_t>(p + 2 * i)});
                break;
            case DType::F8_E4M3:
                for (std::size_t i = 0; i < n; ++i) out[i] = detail::f8_e4m3_to_f32(static_cast<std::uint8_t>(p[i]));
                break;
            case DType::F8_E5M2:
                for (std::size_t i = 0; i < n; ++i) out[i] = detail::f8_e5m2_to_f32(static_cast<std::uint8_t>(p[i]));
                break;
            default:
                fail<UnsupportedError>("[safetensors] ", s_->path.string(), ": tensor '", t.name,
                                       "': read_f32 expects a floating-point dtype, got ", dtype_name(t.dtype),
                                       " (use read_i64)");
        }
        return out;
    }

    /// The values of an integer or BOOL tensor as int64 (BOOL: any non-zero byte is 1). A U64
    /// value above INT64_MAX, or a floating-point dtype: UnsupportedError.
    std::vector<std::int64_t> read_i64(std::string_view name) const {
        const TensorInfo& t = info(name);
        const std::byte* p = data(t);
        const std::size_t n = t.nbytes / dtype_size(t.dtype);
        std::vector<std::int64_t> out(n);
        auto widen_all = [&]<class T>(T) {
            for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(detail::load_le<T>(p + sizeof(T) * i));
        };
        switch (t.dtype) {
            case DType::I64: widen_all(std::int64_t{}); break;
            case DType::I32: widen_all(std::int32_t{}); break;
            case DType::I16: widen_all(std::int16_t{}); break;
            case DType::I8: widen_all(std::int8_t{}); break;
            case DType::U32: widen_all(std::uint32_t{}); break;
            case DType::U16: widen_all(std::uint16_t{}); break;
            case DType::U8: widen_all(std::uint8_t{}); break;
            case DType::BOOL:
                for (std::size_t i = 0; i < n; ++i) out[i] = p[i] != std::byte{0} ? 1 : 0;
                break;
            case DType::U64:
                for (std::size_t i = 0; i < n; ++i) {
                    const auto v = detail::load_le<std::uint64_t>(p + 8 * i);
                    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                        fail<UnsupportedError>("[safetensors] ", s_->path.string(), ": tensor '", t.name,
                                               "': U64 value ", v, " at index ", i, " does not fit in int64");
                    out[i] = static_cast<std::int64_t>(v);
                }
                break;
            default:
                fail<UnsupportedError>("[safetensors] ", s_->path.string(), ": tensor '", t.name,
                                       "': read_i64 expects an integer or BOOL dtype, got ", dtype_name(t.dtype),
                                       " (use read_f32)");
        }
        return out;
    }

    /// The raw bytes of a tensor (little-endian, as stored), inside the mapping.
    std::span<const std::byte> bytes(std::string_view name) const {
        const TensorInfo& t = info(name);
        return {data(t), t.nbytes};
    }

    /// The whole file as mapped (header included).
    std::span<const std::byte> file_bytes() const noexcept { return {s_->base, s_->size}; }
    /// Byte offset of the data area from the start of the file (8 + header length).
    std::size_t data_start() const noexcept { return s_->data_start; }
    /// Hints the kernel about the whole file's access pattern (e.g. Advice::sequential before
    /// converting every tensor once). No effect for from_memory files.
    void advise(Advice a) const noexcept {
        if (s_->map) s_->map->advise(0, s_->size, a);
    }

private:
    struct State {
        std::filesystem::path path;
        std::shared_ptr<const void> owner;      // keeps the bytes alive (mapping or buffer)
        std::shared_ptr<const MappedFile> map;  // null for from_memory
        const std::byte* base = nullptr;
        std::size_t size = 0;
        std::size_t data_start = 0;
        std::vector<TensorInfo> tensors;                  // file order
        std::map<std::string, std::size_t, std::less<>> index;  // name -> position in tensors
        std::map<std::string, std::string> metadata;
    };

    explicit SafetensorsFile(std::shared_ptr<const State> s) : s_(std::move(s)) {}

    const std::byte* data(const TensorInfo& t) const noexcept { return s_->base + s_->data_start + t.offset; }

    static std::shared_ptr<const State> parse(const std::filesystem::path& path, const std::byte* base,
                                              std::size_t size, std::shared_ptr<const void> owner,
                                              std::shared_ptr<const MappedFile> map) {
        const std::string file = path.string();
        auto bad = [&](auto&&... args) { fail<FormatError>("[safetensors] ", file, ": ", args...); };
        if (size < 8) bad("file is ", size, " bytes, shorter than the 8-byte header length field");
        const auto header_len = detail::load_le<std::uint64_t>(base);  // the format is little-endian, as is x86-64
        if (header_len > size - 8)
            bad("header length ", header_len, " runs past the end of the file (", size - 8, " bytes after the length field)");
        if (header_len > detail::kMaxHeaderBytes)
            bad("header length ", header_len, " is absurdly large (limit ", detail::kMaxHeaderBytes, " bytes)");
        if (header_len == 0) bad("header is empty (expected a JSON object)");

        detail::HeaderSax sax;
        const char* h = reinterpret_cast<const char*>(base + 8);
        bool ok = false;
        try {
            ok = nlohmann::json::sax_parse(h, h + header_len, &sax);
        } catch (const nlohmann::json::exception& e) {  // not expected with a SAX handler; never let one escape
            bad("header could not be parsed: ", e.what());
        }
        if (!ok || !sax.finished()) bad(sax.error.empty() ? std::string("header is not a complete JSON object") : sax.error);

        auto s = std::make_shared<State>();
        s->path = path;
        s->owner = std::move(owner);
        s->map = std::move(map);
        s->base = base;
        s->size = size;
        s->data_start = 8 + static_cast<std::size_t>(header_len);
        s->metadata = std::move(sax.metadata);
        const std::size_t data_size = size - s->data_start;

        std::vector<TensorInfo> infos;
        infos.reserve(sax.entries.size());
        for (auto& e : sax.entries) {
            auto bad_t = [&](auto&&... args) { bad("tensor '", e.name, "': ", args...); };
            TensorInfo t;
            if (!parse_dtype(e.dtype, t.dtype)) bad_t("unknown dtype \"", e.dtype, "\"");
            std::uint64_t numel = 1;
            for (auto d : e.shape) {
                if (__builtin_mul_overflow(numel, d, &numel)) bad_t("element count of shape ", shape_string(e.shape), " overflows 64 bits");
            }
            std::uint64_t nbytes = 0;
            if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(dtype_size(t.dtype)), &nbytes))
                bad_t("byte size of shape ", shape_string(e.shape), " overflows 64 bits");
            const std::uint64_t begin = e.offsets[0], end = e.offsets[1];
            if (begin > end) bad_t("data_offsets [", begin, ", ", end, "]: begin > end");
            if (end > data_size) bad_t("data_offsets [", begin, ", ", end, "] end past the data area (", data_size, " bytes)");
            if (end - begin != nbytes)
                bad_t("byte size mismatch: ", dtype_name(t.dtype), " x ", shape_string(e.shape), " = ", nbytes,
                      " bytes expected, data_offsets span ", end - begin);
            t.name = std::move(e.name);
            t.shape.assign(e.shape.begin(), e.shape.end());
            t.offset = static_cast<std::size_t>(begin);
            t.nbytes = static_cast<std::size_t>(nbytes);
            infos.push_back(std::move(t));
        }
        // File order = data order; stable so that equal offsets (empty tensors) keep header order.
        std::stable_sort(infos.begin(), infos.end(),
                         [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
        const TensorInfo* prev = nullptr;  // last non-empty tensor
        for (const auto& t : infos) {
            if (t.nbytes == 0) continue;
            if (prev != nullptr && t.offset < prev->offset + prev->nbytes)
                bad("tensor '", t.name, "' (bytes [", t.offset, ", ", t.offset + t.nbytes, ")) overlaps tensor '",
                    prev->name, "' (bytes [", prev->offset, ", ", prev->offset + prev->nbytes, "))");
            prev = &t;
        }
        s->tensors = std::move(infos);
        for (std::size_t i = 0; i < s->tensors.size(); ++i) s->index.emplace(s->tensors[i].name, i);
        return s;
    }

    std::shared_ptr<const State> s_;
};

}  // namespace hylens::io
