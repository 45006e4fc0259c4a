// items.jsonl read and written without holding it whole (experiments/records.hpp,
// summary.hpp): for_each_jsonl_line against splitting the whole text, lines across its read
// blocks and longer than one; rewrite_items_canonical against sorting the parsed records and
// writing them whole; ScoreRecords against the records' fields, and the summary of any order
// of them; AtomicFileWriter leaves no half file.

#include <hylens/experiments/summary.hpp>

#include <doctest/doctest.h>

#include <cmath>
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
    // Short lines, an empty line, a CRLF line, and lines placed on and across its read blocks' ends.
    std::string text;
    std::vector<std::string> expected;
    const auto add = [&](std::string line) {
        expected.push_back(line);
        text += line + "\n";
    };
    constexpr std::size_t kBlock = std::size_t{1} << 20;  // for_each_jsonl_line's read block
    add("{\"a\":1}");
    add("");
    add("{\"crlf\":1}\r");
    // A line ending exactly at the first block's last byte, a short line across the second
    // block's end, then a line of 2.5 blocks (one block with no newline at all).
    add(std::string(kBlock - 1 - text.size(), 'w'));
    CHECK(text.size() == kBlock);
    add(std::string(kBlock - 5, 'v'));
    add("{\"across\":2}");
    add(std::string(5 * (kBlock / 2), 'x'));
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

TEST_CASE("ScoreRecords: the key, scores, score fields and group of a record, as the summaries read them") {
    ScoreRecords s;
    nlohmann::json r = {{"task", "lookup"}, {"seed", 3}, {"item", 12}, {"condition", "KV_ONLY@0-1"}, {"score", 0.5},
                        {"first_token", true}, {"first_token_b", "x"}, {"context", std::string(300, 'c')}};
    r["score_fields"] = {{"ratio", 0.25}, {"flag", false}, {"note", "text"}, {"n", 7}};
    r["item_fields"] = {{"group", 7}, {"condition", "probe"}};  // a group that is no string: the condition's
    s.add(r);
    CHECK(s.size() == 1);
    CHECK(s.key(0) == RecordKey{"lookup", 3, 12, "KV_ONLY@0-1"});
    CHECK(s.value(0, "score") == 0.5);
    CHECK(s.has(0, "first_token"));
    CHECK(s.value(0, "first_token") == 1.0);
    CHECK(s.has(0, "first_token_b"));               // present, so the metric is listed,
    CHECK(std::isnan(s.value(0, "first_token_b")));  // but not a number
    CHECK(s.fields(0) == std::vector<std::string>{"flag", "n", "ratio"});
    CHECK(s.value(0, "ratio") == 0.25);
    CHECK(s.value(0, "flag") == 0.0);
    CHECK(s.value(0, "n") == 7.0);
    CHECK(std::isnan(s.value(0, "note")));
    CHECK(std::isnan(s.value(0, "missing")));
    CHECK(s.group(0) == "probe");
    // A field named as a record metric is a score field, not that metric.
    s.add({{"task", "lookup"}, {"seed", 3}, {"item", 13}, {"condition", "FULL"}, {"score_fields", {{"score", 1}}},
           {"item_fields", {{"group", ""}, {"condition", "probe"}}}});
    CHECK_FALSE(s.has(1, "score"));
    CHECK(std::isnan(s.value(1, "score")));
    CHECK(s.fields(1) == std::vector<std::string>{"score"});
    CHECK(s.group(1).empty());  // an empty group is no group; the condition is not read then
    CHECK_FALSE(s.has(1, "first_token"));
    CHECK_THROWS_AS(s.add({{"task", "lookup"}, {"seed", 3}}), FormatError);
    CHECK_THROWS_WITH_AS(s.add({{"task", "t"}, {"seed", 1}, {"item", 0}, {"condition", "FULL"}, {"score_fields", {1, 2}}},
                               "items.jsonl line 4"),
                         doctest::Contains("items.jsonl line 4: score_fields is array, not an object"), FormatError);
}

TEST_CASE("ScoreRecords: the summary does not depend on the records' order") {
    std::vector<nlohmann::json> records;
    const std::vector<std::string> conditions = {"FULL", "KV_ONLY", "NONE"};
    for (const std::uint64_t seed : {1ULL, 2ULL})
        for (std::size_t item = 0; item < 9; ++item)
            for (std::size_t c = 0; c < conditions.size(); ++c) {
                nlohmann::json r = awkward_record("lookup", seed, item, conditions[c], ((item * 7 + c * 3 + seed) % 5) / 4.0);
                r["first_token"] = (item + c) % 2 == 0;
                if (c != 2) r["first_token_b"] = (item + c + seed) % 3 == 0;
                r["score_fields"]["answered"] = item % 4 != 0;
                records.push_back(r);
            }
    BootstrapOptions bo;
    bo.resamples = 300;
    const Summary sorted = summarize(records, conditions, bo);
    std::vector<nlohmann::json> shuffled = records;
    for (std::size_t i = 0; i < shuffled.size(); ++i) std::swap(shuffled[i], shuffled[(i * 37 + 11) % shuffled.size()]);
    REQUIRE(shuffled != records);
    const Summary other = summarize(shuffled, conditions, bo);
    CHECK(summary_csv(other) == summary_csv(sorted));
    CHECK(diffs_csv(other) == diffs_csv(sorted));
    CHECK(summary_json(other) == summary_json(sorted));
    std::size_t group_rows = 0;
    for (const SummaryRow& row : sorted.rows) group_rows += row.group == "g0" || row.group == "g1";
    CHECK(group_rows > 0);  // the item groups made rows
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

TEST_CASE("write_record_lines: lines of several files in the order given, and a line changed since it was read refused") {
    test::TempDir dir("jsonl_lines_of_files");
    const fs::path a = dir.path / "a.jsonl", b = dir.path / "b.jsonl", out = dir.path / "out.jsonl";
    write_bytes(a, "{\"n\":1}\n{\"n\": 2.50}\n");
    write_bytes(b, "{\"n\":3,\"s\":\"x\"}\n");
    std::vector<LineRef> refs;
    for (std::size_t f = 0; f < 2; ++f)
        for_each_jsonl_line(f == 0 ? a : b, false, [&](std::size_t n, std::string_view text, std::uint64_t offset) {
            refs.push_back(line_ref(f, n, text, offset));
        });
    REQUIRE(refs.size() == 3);
    // A file no line is of is not opened (a merged folder without items.jsonl).
    const fs::path none = dir.path / "none.jsonl";
    LineRef in_b = refs[2];
    in_b.file = 2;
    const std::string hash = write_record_lines(out, {a, none, b}, {in_b, refs[0], refs[1]});
    CHECK(test::read_text(out) == "{\"n\":3,\"s\":\"x\"}\n{\"n\":1}\n{\"n\":2.5}\n");  // each line as json_line writes it
    CHECK(hash == fnv1a64_file_hex(out));
    write_bytes(a, "{\"n\":1}\n{\"n\": 2.75}\n");  // the same length, another value
    CHECK_THROWS_WITH_AS(write_record_lines(out, {a, b}, refs), doctest::Contains("a.jsonl line 2 is not the line read there"),
                         FormatError);
    CHECK(test::read_text(out) == "{\"n\":3,\"s\":\"x\"}\n{\"n\":1}\n{\"n\":2.5}\n");  // the earlier file kept whole
    write_bytes(a, "{\"n\":1}\n");  // shorter: the line is gone
    CHECK_THROWS_WITH_AS(write_record_lines(out, {a, b}, refs), doctest::Contains("the file changed"), FormatError);
    CHECK_FALSE(fs::exists(out.string() + ".tmp"));
    LineRef missing = refs[0];
    missing.line = 9;
    CHECK_THROWS_WITH_AS(write_record_lines(out, {none}, {missing}), doctest::Contains("cannot open"), FormatError);
}

TEST_CASE("write_record_lines: the lines of more files than it keeps open, interleaved") {
    test::TempDir dir("jsonl_many_files");
    // 150 files of 3 lines, read round-robin (as a merge of 150 shards reads them in canonical
    // order): more files than it keeps open at once, each reopened.
    std::vector<fs::path> files;
    std::vector<std::vector<LineRef>> per_file;
    for (std::size_t f = 0; f < 150; ++f) {
        const std::string n = std::to_string(f);
        files.push_back(dir.path / ("s" + n + ".jsonl"));
        write_bytes(files.back(), "{\"f\":" + n + ",\"l\":0}\n{\"f\":" + n + ",\"l\":1}\n{\"f\":" + n + ",\"l\":2}\n");
        per_file.emplace_back();
        for_each_jsonl_line(files.back(), false, [&](std::size_t line, std::string_view text, std::uint64_t offset) {
            per_file.back().push_back(line_ref(f, line, text, offset));
        });
    }
    std::vector<LineRef> refs;
    std::string expected;
    for (std::size_t l = 0; l < 3; ++l)
        for (std::size_t f = 0; f < files.size(); ++f) {
            refs.push_back(per_file[f][l]);
            expected += "{\"f\":" + std::to_string(f) + ",\"l\":" + std::to_string(l) + "}\n";
        }
    const fs::path out = dir.path / "out.jsonl";
    write_record_lines(out, files, refs);
    CHECK(test::read_text(out) == expected);
}
