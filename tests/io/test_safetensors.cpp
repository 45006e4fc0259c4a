// SafetensorsWriter -> SafetensorsFile round trips for every dtype, zero-copy views,
// conversions, misaligned data areas, and the writer's own checks.

#include <doctest/doctest.h>

#include <hylens/io/safetensors.hpp>
#include <hylens/io/safetensors_writer.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using namespace hylens;
using namespace hylens::io;
using hylens::io_test::TempDir;

namespace {

template <class T>
std::vector<std::byte> as_byte_vector(const std::vector<T>& v) {
    std::vector<std::byte> out(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& v) {
    std::vector<std::uint32_t> out;
    for (float f : v) out.push_back(std::bit_cast<std::uint32_t>(f));
    return out;
}

}  // namespace

TEST_SUITE("io/safetensors") {

TEST_CASE("round trip: every dtype keeps its bytes, shape, dtype and values") {
    TempDir tmp;
    SafetensorsWriter w;
    const std::vector<float> f32 = {1.0f, -2.5f, 3.14159f, 0.0f, -0.0f, 1e-30f, std::numeric_limits<float>::infinity()};
    const std::vector<double> f64 = {1.5, -2.25, 1e300, 1.0 / 3.0};
    const std::vector<float> f16_vals = {1.0f, -0.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.0f};
    const std::vector<float> bf16_vals = {1.0f, 3.14159f, -1e20f, 1e-20f, 0.1f, 7.0f};
    const std::vector<std::int64_t> i64 = {std::numeric_limits<std::int64_t>::min(), -1, 0, 1,
                                           std::numeric_limits<std::int64_t>::max()};
    const std::vector<std::int32_t> i32 = {std::numeric_limits<std::int32_t>::min(), -7, 7, std::numeric_limits<std::int32_t>::max()};
    const std::vector<std::int16_t> i16 = {-32768, -1, 2, 32767};
    const std::vector<std::int8_t> i8 = {-128, -1, 0, 127};
    const std::vector<std::uint64_t> u64 = {0, 1, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())};
    const std::vector<std::uint32_t> u32 = {0, 4294967295u};
    const std::vector<std::uint16_t> u16 = {0, 65535};
    const std::vector<std::uint8_t> u8 = {0, 200, 255};
    const std::vector<std::uint8_t> boolean = {0, 1, 2, 0};
    const std::vector<std::uint8_t> e4m3 = {0x38, 0xb8, 0x7e, 0x01, 0x00, 0x7f};  // 1, -1, 448, 2^-9, 0, NaN
    const std::vector<std::uint8_t> e5m2 = {0x3c, 0xbc, 0x7c, 0x01};              // 1, -1, inf, 2^-16

    w.add_f32("f32", {7}, f32);
    w.add("f64", DType::F64, {2, 2}, as_byte_vector(f64));
    w.add_f16("f16", {2, 3}, f16_vals);
    w.add_bf16("bf16", {3, 2}, bf16_vals);
    w.add_i64("i64", {5}, i64);
    w.add("i32", DType::I32, {4}, as_byte_vector(i32));
    w.add("i16", DType::I16, {2, 2}, as_byte_vector(i16));
    w.add("i8", DType::I8, {4}, as_byte_vector(i8));
    w.add("u64", DType::U64, {3}, as_byte_vector(u64));
    w.add("u32", DType::U32, {2}, as_byte_vector(u32));
    w.add("u16", DType::U16, {2}, as_byte_vector(u16));
    w.add("u8", DType::U8, {3}, as_byte_vector(u8));
    w.add("bool", DType::BOOL, {4}, as_byte_vector(boolean));
    w.add("e4m3", DType::F8_E4M3, {6}, as_byte_vector(e4m3));
    w.add("e5m2", DType::F8_E5M2, {4}, as_byte_vector(e5m2));
    w.add_f32("scalar", {}, std::vector<float>{42.0f});
    w.add_f32("empty", {0, 5}, std::vector<float>{});
    w.set_metadata("format", "pt");
    w.set_metadata("quote\"and\\slash", "line\nbreak \xc3\xa9");
    const auto path = tmp / "all.safetensors";
    w.write(path);

    const auto f = SafetensorsFile::open(path);
    CHECK(f.path() == path);
    CHECK(f.names().size() == 17);
    CHECK(f.metadata().at("format") == "pt");
    CHECK(f.metadata().at("quote\"and\\slash") == "line\nbreak \xc3\xa9");
    CHECK(f.data_start() % 64 == 0);

    SUBCASE("raw bytes and infos") {
        CHECK(f.info("f64").dtype == DType::F64);
        CHECK(f.info("f64").shape == std::vector<std::size_t>{2, 2});
        const auto b = f.bytes("i32");
        REQUIRE(b.size() == 16);
        CHECK(std::memcmp(b.data(), i32.data(), 16) == 0);
        CHECK(f.info("scalar").shape.empty());
        CHECK(f.read_f32("scalar") == std::vector<float>{42.0f});
        CHECK(f.info("empty").nbytes == 0);
        CHECK(f.read_f32("empty").empty());
        // Every tensor starts at a multiple of its element size (the writer groups by size).
        for (const auto& t : f.tensors()) CHECK((f.data_start() + t.offset) % dtype_size(t.dtype) == 0);
    }
    SUBCASE("floats widen exactly") {
        CHECK(bits_of(f.read_f32("f32")) == bits_of(f32));
        const auto d = f.read_f32("f64");
        for (std::size_t i = 0; i < f64.size(); ++i) CHECK(std::bit_cast<std::uint32_t>(d[i]) == std::bit_cast<std::uint32_t>(static_cast<float>(f64[i])));
        CHECK(f.read_f32("f16") == f16_vals);  // all exactly representable in half
        const auto b = f.read_f32("bf16");
        for (std::size_t i = 0; i < bf16_vals.size(); ++i) CHECK(b[i] == to_f32(to_bf16(bf16_vals[i])));
        const auto e4 = f.read_f32("e4m3");
        CHECK(e4[0] == 1.0f);
        CHECK(e4[1] == -1.0f);
        CHECK(e4[2] == 448.0f);
        CHECK(e4[3] == std::ldexp(1.0f, -9));
        CHECK(e4[4] == 0.0f);
        CHECK(std::isnan(e4[5]));
        const auto e5 = f.read_f32("e5m2");
        CHECK(e5[0] == 1.0f);
        CHECK(e5[1] == -1.0f);
        CHECK(std::isinf(e5[2]));
        CHECK(e5[3] == std::ldexp(1.0f, -16));
    }
    SUBCASE("integers widen exactly") {
        CHECK(f.read_i64("i64") == i64);
        CHECK(f.read_i64("i32") == std::vector<std::int64_t>(i32.begin(), i32.end()));
        CHECK(f.read_i64("i16") == std::vector<std::int64_t>(i16.begin(), i16.end()));
        CHECK(f.read_i64("i8") == std::vector<std::int64_t>(i8.begin(), i8.end()));
        CHECK(f.read_i64("u64") == std::vector<std::int64_t>(u64.begin(), u64.end()));
        CHECK(f.read_i64("u32") == std::vector<std::int64_t>(u32.begin(), u32.end()));
        CHECK(f.read_i64("u16") == std::vector<std::int64_t>(u16.begin(), u16.end()));
        CHECK(f.read_i64("u8") == std::vector<std::int64_t>(u8.begin(), u8.end()));
        CHECK(f.read_i64("bool") == std::vector<std::int64_t>{0, 1, 1, 0});
    }
    SUBCASE("the wrong reader names file, tensor and dtype") {
        try {
            (void)f.read_f32("i64");
            FAIL("no throw");
        } catch (const UnsupportedError& e) {
            const std::string m = e.what();
            CHECK(io_test::has(m, path.string()));
            CHECK(io_test::has(m, "'i64'"));
            CHECK(io_test::has(m, "I64"));
        }
        CHECK_THROWS_AS((void)f.read_i64("f32"), UnsupportedError);
        try {
            (void)f.weight("i32");
            FAIL("no throw");
        } catch (const UnsupportedError& e) {
            const std::string m = e.what();
            CHECK(io_test::has(m, path.string()));
            CHECK(io_test::has(m, "'i32'"));
            CHECK(io_test::has(m, "I32"));
        }
        CHECK_THROWS_AS((void)f.weight("f64"), UnsupportedError);
    }
    SUBCASE("an absent tensor is a FormatError naming file and tensor") {
        CHECK_FALSE(f.contains("nope"));
        try {
            (void)f.info("nope");
            FAIL("no throw");
        } catch (const FormatError& e) {
            CHECK(io_test::has(e.what(), path.string()));
            CHECK(io_test::has(e.what(), "'nope'"));
        }
    }
}

TEST_CASE("U64 values above INT64_MAX are refused by read_i64") {
    TempDir tmp;
    SafetensorsWriter w;
    w.add("big", DType::U64, {1}, as_byte_vector(std::vector<std::uint64_t>{~0ull}));
    w.write(tmp / "u.safetensors");
    CHECK_THROWS_AS((void)SafetensorsFile::open(tmp / "u.safetensors").read_i64("big"), UnsupportedError);
}

TEST_CASE("F32 and BF16 weights are zero-copy views that keep the mapping alive") {
    TempDir tmp;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist;
    std::vector<float> a(48 * 32), b(16 * 24);
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    SafetensorsWriter w;
    w.add_bf16("layer.0.w", {48, 32}, a);
    w.add_f32("layer.0.b", {16, 24}, b);
    w.write(tmp / "m.safetensors");

    Weight wa, wb;
    {
        const auto f = SafetensorsFile::open(tmp / "m.safetensors");
        wa = f.weight("layer.0.w");
        wb = f.weight("layer.0.b");
        const auto file = f.file_bytes();
        const auto in_file = [&](const void* p) {
            const auto x = reinterpret_cast<std::uintptr_t>(p), lo = reinterpret_cast<std::uintptr_t>(file.data());
            return x >= lo && x - lo < file.size();
        };
        CHECK(wa.is_bf16());
        CHECK(in_file(wa.raw()));
        CHECK(wa.raw() == f.bytes("layer.0.w").data());
        CHECK(wb.dtype() == DType::F32);
        CHECK(in_file(wb.raw()));
        CHECK(wa.shape() == std::vector<std::size_t>{48, 32});
        CHECK(wa.name() == "layer.0.w");
    }
    // The file object is gone; the weights still read the mapping (ASan would flag a use after unmap).
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(wa.at(i) == to_f32(to_bf16(a[i])));
    CHECK(wb.to_vector() == b);
}

TEST_CASE("F16 weights become owned F32, a misaligned data area is copied, bit for bit") {
    TempDir tmp;
    // Hand-made file whose header length is odd, so the data area starts at an odd address.
    const std::vector<float> vals = {1.0f, -2.0f, 0.375f, 1024.0f};
    std::string data(4 * 4 + 4 * 2 + 4 * 2, '\0');
    std::memcpy(data.data(), vals.data(), 16);
    for (std::size_t i = 0; i < 4; ++i) {
        const std::uint16_t hb = to_bf16(vals[i]).bits, hh = to_f16(vals[i]).bits;
        std::memcpy(data.data() + 16 + 2 * i, &hb, 2);
        std::memcpy(data.data() + 24 + 2 * i, &hh, 2);
    }
    std::string header =
        R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
        R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]},)"
        R"("h":{"dtype":"F16","shape":[4],"data_offsets":[24,32]}})";
    if (header.size() % 2 == 0) header += ' ';
    io_test::write_bytes(tmp / "odd.safetensors", io_test::raw_file(header, data));
    const auto f = SafetensorsFile::open(tmp / "odd.safetensors");
    REQUIRE(f.data_start() % 2 == 1);

    const Weight a = f.weight("a");
    CHECK(a.dtype() == DType::F32);
    CHECK(a.raw() != f.bytes("a").data());  // copied: the mapped address is not 4-byte aligned
    CHECK(a.to_vector() == vals);
    CHECK(a.shape() == std::vector<std::size_t>{2, 2});

    const Weight b = f.weight("b");
    CHECK(b.is_bf16());
    CHECK(b.raw() != f.bytes("b").data());
    CHECK(std::memcmp(b.raw(), f.bytes("b").data(), 8) == 0);

    const Weight h = f.weight("h");
    CHECK(h.dtype() == DType::F32);
    CHECK(h.to_vector() == vals);
}

TEST_CASE("names: file order, the writer groups by element size, then insertion or name order") {
    TempDir tmp;
    const std::vector<float> one = {1.0f};
    const std::vector<std::int64_t> idx = {3};
    SUBCASE("insertion order") {
        SafetensorsWriter w;
        w.add_bf16("z", {1}, one);
        w.add_f32("y", {1}, one);
        w.add_bf16("a", {1}, one);
        w.add_i64("x", {1}, idx);
        w.write(tmp / "o.safetensors");
        CHECK(SafetensorsFile::open(tmp / "o.safetensors").names() == std::vector<std::string>{"x", "y", "z", "a"});
    }
    SUBCASE("by name") {
        SafetensorsWriter w(SafetensorsWriter::Order::by_name);
        w.add_bf16("z", {1}, one);
        w.add_f32("y", {1}, one);
        w.add_bf16("a", {1}, one);
        w.write(tmp / "o.safetensors");
        CHECK(SafetensorsFile::open(tmp / "o.safetensors").names() == std::vector<std::string>{"y", "a", "z"});
    }
}

TEST_CASE("names with JSON specials and UTF-8 survive the round trip") {
    TempDir tmp;
    const std::vector<std::string> names = {"quote\"d", "back\\slash", "tab\tnew\nline", "\xe6\xbc\xa2\xe5\xad\x97", "", "ctl\x01"};
    SafetensorsWriter w;
    for (const auto& n : names) w.add_f32(n, {1}, std::vector<float>{1.0f});
    w.write(tmp / "n.safetensors");
    const auto f = SafetensorsFile::open(tmp / "n.safetensors");
    CHECK(f.names() == names);
}

TEST_CASE("writer refuses bad input") {
    TempDir tmp;
    SafetensorsWriter w;
    const std::vector<float> v = {1.0f, 2.0f};
    CHECK_THROWS_AS(w.add_f32("x", {3}, v), ShapeError);
    CHECK_THROWS_AS(w.add_f32("__metadata__", {2}, v), FormatError);
    CHECK_THROWS_AS(w.add_f32("bad\xff", {2}, v), FormatError);
    CHECK_THROWS_AS(w.add_f32("o", {std::size_t{1} << 62, 8}, v), ShapeError);
    w.add_f32("x", {2}, v);  // the failed add above did not reserve the name
    CHECK_THROWS_AS(w.add_f32("x", {2}, v), FormatError);
    CHECK_THROWS_AS(w.set_metadata("k", "\xc0\x80"), FormatError);  // overlong NUL
    try {
        w.write(tmp / "no" / "such" / "dir.safetensors");
        FAIL("no throw");
    } catch (const FormatError& e) {
        CHECK(io_test::has(e.what(), "dir.safetensors"));
    }
    // A directory in the file's place: the rename's own reason (it read "Success", the error of
    // the clean-up after it), and no partial file left behind.
    std::filesystem::create_directories(tmp / "taken");
    try {
        w.write(tmp / "taken");
        FAIL("no throw");
    } catch (const FormatError& e) {
        CHECK(io_test::has(e.what(), "cannot move the written file into place: Is a directory"));
    }
    CHECK_FALSE(std::filesystem::exists(tmp / "taken.partial"));
}

TEST_CASE("from_memory reads the same bytes as open") {
    TempDir tmp;
    SafetensorsWriter w;
    w.add_bf16("w", {2}, std::vector<float>{1.0f, 2.0f});
    w.write(tmp / "m.safetensors");
    const auto f = SafetensorsFile::open(tmp / "m.safetensors");
    const auto m = SafetensorsFile::from_memory(f.file_bytes(), "copy");
    CHECK(m.path() == "copy");
    CHECK(m.names() == f.names());
    CHECK(m.read_f32("w") == std::vector<float>{1.0f, 2.0f});
}

}  // TEST_SUITE
