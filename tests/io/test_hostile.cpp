// Hostile safetensors files, generated here: each defect must be a FormatError that names the
// file and (where there is one) the tensor, both through open() and through from_memory().

#include <doctest/doctest.h>
#include <sys/stat.h>  // ::mkfifo
#include <unistd.h>    // ::truncate

#include <hylens/io/mmap.hpp>
#include <hylens/io/safetensors.hpp>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using namespace hylens;
using namespace hylens::io;
using hylens::io_test::raw_file;
using hylens::io_test::TempDir;

namespace {

struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> mentions;  // besides the file name
};

std::string entry(const std::string& name, const std::string& body) { return "\"" + name + "\":{" + body + "}"; }

std::vector<Case> hostile_cases() {
    const std::string d16(16, '\0');
    const std::string ok = entry("ok", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])");
    auto one = [&](const std::string& body, std::string data = std::string(16, '\0')) {
        return raw_file("{" + entry("evil.weight", body) + "}", data);
    };
    return {
        {"shorter than 8 bytes", std::string("\x05\0\0", 3), {"shorter than the 8-byte"}},
        {"header length past the end", raw_file(1000, "{}", ""), {"runs past the end", "1000"}},
        {"header length near 2^64", raw_file(~0ull, "{}", ""), {"runs past the end"}},
        {"empty header", raw_file(0, "", d16), {"header is empty"}},
        {"not JSON", raw_file("{not json", d16), {"not valid JSON"}},
        {"invalid UTF-8 in a name", raw_file("{\"ev\xff\":{}}", d16), {"not valid JSON"}},
        {"truncated JSON", raw_file(R"({"evil.weight":{"dtype":"F32")", d16), {"not valid JSON"}},
        {"trailing garbage", raw_file("{} x", d16), {"not valid JSON"}},
        {"header is a list", raw_file("[1,2]", d16), {"not a JSON object"}},
        {"header is a string", raw_file("\"abc\"", d16), {"not a JSON object"}},
        {"entry is a number", raw_file(R"({"evil.weight":5})", d16), {"evil.weight", "not a JSON object"}},
        {"entry is a list", raw_file(R"({"evil.weight":[1]})", d16), {"evil.weight", "not a JSON object"}},
        {"missing dtype", one(R"("shape":[2],"data_offsets":[0,8])"), {"evil.weight", "missing \"dtype\""}},
        {"missing shape", one(R"("dtype":"F32","data_offsets":[0,8])"), {"evil.weight", "missing \"shape\""}},
        {"missing data_offsets", one(R"("dtype":"F32","shape":[2])"), {"evil.weight", "missing \"data_offsets\""}},
        {"unknown dtype", one(R"("dtype":"F128","shape":[2],"data_offsets":[0,8])"), {"evil.weight", "unknown dtype", "F128"}},
        {"dtype not a string", one(R"("dtype":4,"shape":[2],"data_offsets":[0,8])"), {"evil.weight", "dtype must be a string"}},
        {"dtype twice", one(R"("dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8])"), {"evil.weight", "twice"}},
        {"shape not a list", one(R"("dtype":"F32","shape":2,"data_offsets":[0,8])"), {"evil.weight", "shape must be a list"}},
        {"negative dim", one(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), {"evil.weight", "negative"}},
        {"fractional dim", one(R"("dtype":"F32","shape":[2.5],"data_offsets":[0,8])"), {"evil.weight", "non-integer"}},
        {"dim beyond 2^64", one(R"("dtype":"F32","shape":[99999999999999999999999],"data_offsets":[0,8])"), {"evil.weight", "non-integer"}},
        {"string dim", one(R"("dtype":"F32","shape":["2"],"data_offsets":[0,8])"), {"evil.weight", "non-negative integers"}},
        {"nested shape", one(R"("dtype":"F32","shape":[[2]],"data_offsets":[0,8])"), {"evil.weight", "non-negative integers"}},
        {"element count overflow", one(R"("dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,8])"), {"evil.weight", "overflows"}},
        {"byte count overflow", one(R"("dtype":"F64","shape":[2305843009213693952,2],"data_offsets":[0,8])"), {"evil.weight", "overflows"}},
        {"one offset", one(R"("dtype":"F32","shape":[2],"data_offsets":[8])"), {"evil.weight", "exactly two"}},
        {"three offsets", one(R"("dtype":"F32","shape":[2],"data_offsets":[0,8,8])"), {"evil.weight", "exactly two"}},
        {"negative offset", one(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])"), {"evil.weight", "negative"}},
        {"offsets not a list", one(R"("dtype":"F32","shape":[2],"data_offsets":"0-8")"), {"evil.weight", "data_offsets must be a list"}},
        {"begin > end", one(R"("dtype":"F32","shape":[2],"data_offsets":[8,0])"), {"evil.weight", "begin > end"}},
        {"end past the data area", one(R"("dtype":"F32","shape":[2],"data_offsets":[16,24])"), {"evil.weight", "past the data area"}},
        {"end near 2^64", one(R"("dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615])"), {"evil.weight", "past the data area"}},
        {"size mismatch", one(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), {"evil.weight", "byte size mismatch", "12", "8"}},
        {"overlap", raw_file("{" + ok + "," + entry("evil.weight", R"("dtype":"F32","shape":[2],"data_offsets":[4,12])") + "}", d16),
         {"evil.weight", "'ok'", "overlaps"}},
        {"duplicate names", raw_file("{" + entry("evil.weight", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") + "," +
                                          entry("evil.weight", R"("dtype":"F32","shape":[2],"data_offsets":[8,16])") + "}", d16),
         {"evil.weight", "duplicate"}},
        {"metadata not an object", raw_file(R"({"__metadata__":[1]})", d16), {"__metadata__ must be an object"}},
        {"metadata value not a string", raw_file(R"({"__metadata__":{"format":1}})", d16), {"format", "must be a string"}},
        {"metadata twice", raw_file(R"({"__metadata__":{},"__metadata__":{}})", d16), {"__metadata__ appears twice"}},
    };
}

void expect_format_error(const std::function<void()>& fn, const std::string& file, const Case& c) {
    try {
        fn();
        FAIL("no exception for: " << std::string(c.what));
    } catch (const FormatError& e) {
        const std::string m = e.what();
        CHECK_MESSAGE(m.find(file) != std::string::npos, c.what, ": ", m);
        for (const auto& s : c.mentions) CHECK_MESSAGE(m.find(s) != std::string::npos, c.what, ": '", s, "' not in: ", m);
    }
}

}  // namespace

TEST_SUITE("io/safetensors hostile") {

TEST_CASE("every hostile header is a FormatError naming the file and the tensor") {
    TempDir tmp;
    int i = 0;
    for (const auto& c : hostile_cases()) {
        CAPTURE(std::string(c.what));
        const auto path = tmp / ("hostile-" + std::to_string(i++) + ".safetensors");
        io_test::write_bytes(path, c.bytes);
        expect_format_error([&] { (void)SafetensorsFile::open(path); }, path.string(), c);
        const std::span<const std::byte> mem(reinterpret_cast<const std::byte*>(c.bytes.data()), c.bytes.size());
        expect_format_error([&] { (void)SafetensorsFile::from_memory(mem, "mem-" + std::to_string(i)); },
                            "mem-" + std::to_string(i), c);
    }
}

TEST_CASE("unknown fields inside an entry are ignored, as in the reference reader") {
    TempDir tmp;
    const std::string h = R"({"w":{"dtype":"F32","extra":{"deep":[1,{"x":null}],"s":"t"},"shape":[2],"note":true,"data_offsets":[0,8]}})";
    io_test::write_bytes(tmp / "x.safetensors", raw_file(h, std::string(8, '\0')));
    const auto f = SafetensorsFile::open(tmp / "x.safetensors");
    CHECK(f.info("w").shape == std::vector<std::size_t>{2});
}

TEST_CASE("a header length above the 100 MB limit is refused before parsing") {
    TempDir tmp;
    const auto path = tmp / "huge.safetensors";
    // A sparse 120 MB file costs no disk; its length field claims a 110 MB header.
    io_test::write_bytes(path, raw_file(110'000'000, "", ""));
    REQUIRE(::truncate(path.c_str(), 120'000'000) == 0);
    try {
        (void)SafetensorsFile::open(path);
        FAIL("no throw");
    } catch (const FormatError& e) {
        const std::string m = e.what();
        CHECK(m.find(path.string()) != std::string::npos);
        CHECK(m.find("absurdly large") != std::string::npos);
    }
}

TEST_CASE("files that cannot be mapped") {
    TempDir tmp;
    SUBCASE("empty file") {
        io_test::write_bytes(tmp / "empty.safetensors", "");
        try {
            (void)SafetensorsFile::open(tmp / "empty.safetensors");
            FAIL("no throw");
        } catch (const FormatError& e) {
            CHECK(std::string(e.what()).find((tmp / "empty.safetensors").string()) != std::string::npos);
            CHECK(std::string(e.what()).find("empty") != std::string::npos);
        }
    }
    SUBCASE("a folder") {
        try {
            (void)MappedFile::open(tmp.path());
            FAIL("no throw");
        } catch (const FormatError& e) {
            CHECK(std::string(e.what()).find(tmp.path().string()) != std::string::npos);
            CHECK(std::string(e.what()).find("not a regular file") != std::string::npos);
        }
    }
    SUBCASE("a missing file") {
        CHECK_THROWS_AS((void)SafetensorsFile::open(tmp / "missing.safetensors"), FormatError);
    }
    SUBCASE("a FIFO does not block and is refused") {
        const auto fifo = tmp / "fifo";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        CHECK_THROWS_AS((void)MappedFile::open(fifo), FormatError);
    }
}

TEST_CASE("MappedFile maps the bytes, moves, and advises without effect on content") {
    TempDir tmp;
    io_test::write_bytes(tmp / "f.bin", "hello mmap");
    MappedFile m = MappedFile::map(tmp / "f.bin");
    REQUIRE(m.size() == 10);
    CHECK(std::string(reinterpret_cast<const char*>(m.data()), 10) == "hello mmap");
    m.advise(0, 10, Advice::willneed);
    m.advise(3, 1000, Advice::sequential);  // clipped to the file
    CHECK(m.contains(m.data() + 9));
    CHECK_FALSE(m.contains(m.data() + 10));
    MappedFile moved = std::move(m);
    CHECK(moved.size() == 10);
    CHECK(m.size() == 0);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    CHECK(m.data() == nullptr);
    CHECK(std::string(reinterpret_cast<const char*>(moved.data()), 5) == "hello");
    MappedFile other = MappedFile::map(tmp / "f.bin");
    other = std::move(moved);  // unmaps other's own mapping first
    CHECK(other.size() == 10);
    const auto shared = MappedFile::open(tmp / "f.bin");
    CHECK(shared->bytes().size() == 10);
}

}  // TEST_SUITE
