// items.jsonl read and written without holding it whole (experiments/records.hpp,
// summary.hpp): for_each_jsonl_line against splitting the whole text, lines across its read
// blocks and longer than one; rewrite_items_canonical against sorting the parsed records and
// writing them whole; summary_view's summary against the whole records'; AtomicFileWriter
// leaves no half file.

#include <hylens/experiments/summary.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fixtures.hpp"

using namespace hylens;
using namespace hylens::experiments;
namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& p, const std::string& s) {
    std::ofstream o(p, std::ios::binary);
    o << s;
}

struct SeenLine {
    std::size_t number;
    std::string text;
    std::uint64_t offset;
};

std::vector<SeenLine> lines_of(const fs::path& p, bool drop_torn_tail) {
    std::vector<SeenLine> out;
    for_each_jsonl_line(p, drop_torn_tail, [&](std::size_t n, std::string_view t, std::uint64_t off) {
        out.push_back({n, std::string(t), off});
    });
    return out;
}

/// A record with values whose text a second json_line must reproduce: shortest doubles,
/// -0.0, large integers, escapes, multi-byte text, an invalid UTF-8 byte (written as U+FFFD).
nlohmann::json awkward_record(const std::string& task, std::uint64_t seed, std::size_t item, const std::string& cond,
                              double score) {
    nlohmann::json r = {{"task", task}, {"seed", seed}, {"item", item}, {"condition", cond}, {"score", score}};
    r["generated"] = std::string("caf\xc3\xa9 \"q\"\n\t\x01 ") + std::string(1, '\xff') + " end";
    r["generated_ids"] = {0, 18446744073709551615ULL, 7};
    r["score_fields"] = {{"ratio", 0.1}, {"tiny", 1e-300}, {"neg_zero", -0.0}, {"big", 1.7976931348623157e308},
                         {"flag", true}, {"note", "text"}, {"third", 1.0 / 3.0}};
    r["item_fields"] = {{"group", "g" + std::to_string(item % 2)}, {"condition", 3}};
    return r;
}

}  // namespace

TEST_CASE("for_each_jsonl_line: every line with its number and offset, across its read blocks") {
    test::TempDir dir("jsonl_lines");
    const fs::path p = dir.path / "items.jsonl";
    // Short lines, an empty line, a line of 1.5 MiB (longer than a block) and lines around the
    // first block's end at 1 MiB, so lines straddle both block ends.
    std::string text;
    std::vector<std::string> expected;
    const auto add = [&](std::string line) {
        expected.push_back(line);
        text += line + "\n";
    };
    add("{\"a\":1}");
    add("");
    add(std::string(3 * (std::size_t{1} << 19), 'x'));
    for (int i = 0; i < 40000; ++i) add("{\"i\":" + std::to_string(i) + "}");
    write_bytes(p, text);
    const std::vector<SeenLine> seen = lines_of(p, false);
    REQUIRE(seen.size() == expected.size());
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < seen.size(); ++i) {
        CHECK(seen[i].number == i + 1);
        CHECK(seen[i].offset == offset);
        CHECK(seen[i].text == expected[i]);
        CHECK(text.substr(seen[i].offset, seen[i].text.size()) == seen[i].text);
        offset += expected[i].size() + 1;
    }
    CHECK(offset == text.size());
    CHECK(lines_of(dir.path / "missing.jsonl", false).empty());
}

TEST_CASE("for_each_jsonl_line: a torn last line is cut off the file, or refused") {
    test::TempDir dir("jsonl_torn");
    const fs::path p = dir.path / "items.jsonl";
    const std::string whole = "{\"a\":1}\n" + std::string((std::size_t{1} << 20) + 5, 'y') + "\n";
    write_bytes(p, whole + "{\"a\":2");
    CHECK_THROWS_AS(lines_of(p, false), FormatError);
    CHECK(fs::file_size(p) == whole.size() + 6);  // refused: the file as it was
    CHECK(lines_of(p, true).size() == 2);
    CHECK(test::read_text(p) == whole);
    // read_jsonl on top of it: the parsed lines, and a line that is not JSON named.
    write_bytes(p, "{\"a\":1}\n[2,3]\n");
    CHECK(read_jsonl(p, false) == std::vector<nlohmann::json>{{{"a", 1}}, {2, 3}});
    write_bytes(p, "{\"a\":1}\n{oops\n");
    CHECK_THROWS_WITH_AS(read_jsonl(p, false), doctest::Contains("line 2 is not JSON"), FormatError);
}

TEST_CASE("rewrite_items_canonical: the bytes and fingerprint of sorting the records read whole") {
    test::TempDir dir("jsonl_canonical");
    const fs::path p = dir.path / "items.jsonl";
    const std::vector<std::string> conditions = {"FULL", "KV_ONLY", "REC_ONLY@1"};
    // Appended out of order, as a resumed study appends, with a condition the study does not
    // list (sorted last, by name).
    std::string text;
    std::vector<nlohmann::json> records;
    for (const std::string task : {"zeta", "alpha"})
        for (const std::uint64_t seed : {2ULL, 1ULL})
            for (const std::size_t item : {3u, 0u, 11u})
                for (const std::string cond : {"REC_ONLY@1", "OTHER", "FULL", "KV_ONLY"}) {
                    const nlohmann::json r = awkward_record(task, seed, item, cond, static_cast<double>(item) / 7.0);
                    text += json_line(r) + "\n";
                    records.push_back(r);
                }
    write_bytes(p, text);
    const std::string hash = rewrite_items_canonical(p, conditions);
    sort_records(records, conditions);
    std::string expected;
    for (const nlohmann::json& r : records) expected += json_line(r) + "\n";
    CHECK(test::read_text(p) == expected);
    CHECK(hash == fnv1a64_hex(expected));
    CHECK(fnv1a64_file_hex(p) == hash);
    CHECK_FALSE(fs::exists(p.string() + ".tmp"));
    const std::vector<nlohmann::json> back = read_jsonl(p, false);
    CHECK(back.front()["task"] == "alpha");
    CHECK(back.front()["condition"] == "FULL");
    CHECK(back[3]["condition"] == "OTHER");
    CHECK(back.front()["generated"].get<std::string>().find("\xef\xbf\xbd") != std::string::npos);  // U+FFFD
    // A line that is not a record is named.
    write_bytes(p, text + "{\"task\":\"x\"}\n");
    CHECK_THROWS_WITH_AS(rewrite_items_canonical(p, conditions), doctest::Contains("not a study record"), FormatError);
}

TEST_CASE("summary_view: the summary of the views is the summary of the whole records") {
    std::vector<nlohmann::json> records, views;
    const std::vector<std::string> conditions = {"FULL", "KV_ONLY", "NONE"};
    for (const std::uint64_t seed : {1ULL, 2ULL})
        for (std::size_t item = 0; item < 9; ++item)
            for (std::size_t c = 0; c < conditions.size(); ++c) {
                nlohmann::json r = awkward_record("lookup", seed, item, conditions[c], ((item * 7 + c * 3 + seed) % 5) / 4.0);
                r["first_token"] = (item + c) % 2 == 0;
                if (c != 2) r["first_token_b"] = (item + c + seed) % 3 == 0;
                r["score_fields"]["answered"] = item % 4 != 0;
                if (item == 4) r["score_fields"]["ratio"] = "not a number";  // NaN in both
                r["context"] = std::string(500, 'c');
                records.push_back(r);
                views.push_back(summary_view(r));
            }
    CHECK_FALSE(views.front().contains("context"));
    CHECK_FALSE(views.front().contains("generated"));
    CHECK_FALSE(views.front()["score_fields"].contains("note"));
    CHECK(views.front()["item_fields"] == nlohmann::json{{"group", "g0"}});
    BootstrapOptions bo;
    bo.resamples = 300;
    const Summary whole = summarize(records, conditions, bo), viewed = summarize(views, conditions, bo);
    CHECK(summary_csv(viewed) == summary_csv(whole));
    CHECK(diffs_csv(viewed) == diffs_csv(whole));
    CHECK(summary_json(viewed) == summary_json(whole));
    CHECK(whole.rows.size() > 3 * 2);  // groups g0 / g1 and the score fields made rows
}

TEST_CASE("AtomicFileWriter: the file appears whole at commit, and not at all without it") {
    test::TempDir dir("atomic_writer");
    const fs::path p = dir.path / "out.txt";
    write_bytes(p, "old\n");
    {
        AtomicFileWriter w(p);
        w.write("new ");
        CHECK(test::read_text(p) == "old\n");
    }  // dropped without commit (an exception part-way)
    CHECK(test::read_text(p) == "old\n");
    CHECK_FALSE(fs::exists(p.string() + ".tmp"));
    {
        AtomicFileWriter w(p);
        w.write("new ");
        w.write("text\n");
        w.commit();
    }
    CHECK(test::read_text(p) == "new text\n");
    CHECK_FALSE(fs::exists(p.string() + ".tmp"));
}

TEST_CASE("write_record_lines: lines of several files in the order given; a line changed since it was read is refused") {
    test::TempDir dir("jsonl_lines_of_files");
    const fs::path a = dir.path / "a.jsonl", b = dir.path / "b.jsonl", out = dir.path / "out.jsonl";
    write_bytes(a, "{\"n\":1}\n{\"n\": 2.50}\n");
    write_bytes(b, "{\"n\":3,\"s\":\"x\"}\n");
    std::vector<LineRef> refs;
    for (std::size_t f = 0; f < 2; ++f)
        for_each_jsonl_line(f == 0 ? a : b, false, [&](std::size_t, std::string_view text, std::uint64_t offset) {
            refs.push_back(line_ref(f, text, offset));
        });
    REQUIRE(refs.size() == 3);
    const std::string hash = write_record_lines(out, {a, b}, {refs[2], refs[0], refs[1]});
    CHECK(test::read_text(out) == "{\"n\":3,\"s\":\"x\"}\n{\"n\":1}\n{\"n\":2.5}\n");  // each line as json_line writes it
    CHECK(hash == fnv1a64_file_hex(out));
    write_bytes(a, "{\"n\":1}\n{\"n\": 2.75}\n");  // the same length, another value
    CHECK_THROWS_WITH_AS(write_record_lines(out, {a, b}, refs), doctest::Contains("the file changed"), FormatError);
    CHECK(test::read_text(out) == "{\"n\":3,\"s\":\"x\"}\n{\"n\":1}\n{\"n\":2.5}\n");  // the earlier file kept whole
    write_bytes(a, "{\"n\":1}\n");  // shorter: the line is gone
    CHECK_THROWS_WITH_AS(write_record_lines(out, {a, b}, refs), doctest::Contains("the file changed"), FormatError);
    CHECK_FALSE(fs::exists(out.string() + ".tmp"));
}
