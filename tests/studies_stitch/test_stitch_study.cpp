// The stitch study (experiments/stitch_study.hpp): the fit-corpus reader, the identity
// self-stitch through the study's forwards, and the study end to end on the trained organisms
// of models/ (granite-h-tiny host, Mamba-2; qwen35-tiny donor, Gated DeltaNet). The organisms
// are retrained from time to time, so nothing here depends on what they have learned: the
// checks are exact identities, float32-rounding bounds, determinism, shards and resume. Each
// test copies the model folders first, so a retraining in the middle cannot change weights.

#include <doctest/doctest.h>

#include <hylens/experiments/prompt.hpp>
#include <hylens/experiments/stitch_study.hpp>
#include <hylens/models/load.hpp>
#include <hylens/tasks/lookup/fit_corpus.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>  // WEXITSTATUS
#include <unistd.h>    // getpid

#include "studies_circuit/fixtures.hpp"
#include "support/damaged_model.hpp"
#include "support/figure_scripts.hpp"
#include "support/killed_run.hpp"
#include "support/tokenizer_without.hpp"
#include "../support/nan_max.hpp"

namespace {

namespace fs = std::filesystem;
namespace ex = hylens::experiments;
namespace lk = hylens::tasks::lookup;
using hylens::test::studies::read_text;
using hylens::test::studies::TempDir;
using hylens::test::studies::write_text;
using hylens::test::studies::organism_copy;
using hylens::test::studies::records_of;


const lk::FitCorpus& policy_corpus() {
    static const lk::FitCorpus c = lk::read_fit_corpus();
    return c;
}

constexpr double kU = 5.9604644775390625e-08;  // 2^-24, float32 unit roundoff

}  // namespace

TEST_CASE("fit corpus: the cleaning rules on a hand-written text") {
    const std::string text =
        "Title\n=====\n\n"
        "This is a first paragraph that runs over two lines and ends with a full stop, so it is kept.  [1]\n"
        "Its second line \xe2\x80\x9cquotes\xe2\x80\x9d a word and it\xe2\x80\x99s done.\n\n"
        "  An indented code block or quotation, long enough to be kept if it were not indented at all.\n\n"
        "* A list item that is long enough to pass the length rule and ends with a full stop.\n\n"
        "A paragraph without a final stop, long enough to pass the length rule but it has no end\n\n"
        "Short one.\n\n"
        "A paragraph with a non-ASCII character \xc3\xa9 that cannot be normalised, long enough to count.\n\n"
        "This is a first paragraph that runs over two lines and ends with a full stop, so it is kept.  [1]\n"
        "Its second line \xe2\x80\x9cquotes\xe2\x80\x9d a word and it\xe2\x80\x99s done.\n";
    const std::vector<std::string> p = lk::corpus_paragraphs(text, 80);
    REQUIRE(p.size() == 1);  // the repeat of the first paragraph is dropped
    CHECK(p[0] ==
          "This is a first paragraph that runs over two lines and ends with a full stop, so it is kept. Its second "
          "line \"quotes\" a word and it's done.");
    const std::vector<std::string> paras{std::string(50, 'a') + ".", std::string(30, 'b') + ".", std::string(70, 'c') + ".",
                                         std::string(10, 'd') + "."};
    const lk::FitCorpus c = lk::make_fit_corpus(paras, {1, 60, 2});
    REQUIRE(c.fit.size() == 1);
    REQUIRE(c.held_out.size() == 1);
    CHECK(c.fit[0] == paras[0] + "\n" + paras[1]);  // 82 >= 60: chunk 0 (fit)
    CHECK(c.held_out[0] == paras[2]);              // chunk 1 (held out); the last 11 characters are no chunk
    CHECK_THROWS_AS(lk::read_fit_corpus("/nonexistent/corpus.txt"), hylens::FormatError);
    // The study names its corpus by content: the same chunks from another file agree, other
    // chunks (here the paragraphs in another order) do not (the definition held the path).
    lk::FitCorpus copy = lk::make_fit_corpus(paras, {1, 60, 2});
    copy.source = "/elsewhere/copy.txt";
    CHECK(ex::stitch_corpus_digest(copy) == ex::stitch_corpus_digest(c));
    const lk::FitCorpus reordered = lk::make_fit_corpus({paras[2], paras[1], paras[0], paras[3]}, {1, 60, 2});
    CHECK(ex::stitch_corpus_digest(reordered)["fnv1a64"] != ex::stitch_corpus_digest(c)["fnv1a64"]);
    // FNV-1a over each part's name, then each chunk as "<size>:<text>" (FNV-1a is a stream: one
    // call over the concatenation is the same digest).
    const std::string encoded = "fit" + std::to_string(c.fit[0].size()) + ":" + c.fit[0] + "held_out" +
                                std::to_string(c.held_out[0].size()) + ":" + c.held_out[0];
    CHECK(ex::stitch_corpus_digest(c) ==
          nlohmann::json{{"fit_chunks", 1}, {"held_out_chunks", 1}, {"fnv1a64", ex::fnv1a64_hex(encoded)}});
}

TEST_CASE("fit corpus: the Debian Policy Manual (package debian-policy) cleans to running English text") {
    const lk::FitCorpus& c = policy_corpus();
    CHECK(c.source == std::string(lk::fit_corpus_default_path));
    CHECK(c.bytes > 400000);
    REQUIRE(c.paragraphs.size() > 500);
    CHECK(c.paragraphs.front().rfind("This manual describes the policy requirements for the Debian distribution.", 0) == 0);
    std::size_t chars = 0;
    for (const std::string& p : c.paragraphs) {
        chars += p.size();
        CHECK(p.size() >= 80);
        CHECK(p.find("  ") == std::string::npos);
        CHECK(p.find('\n') == std::string::npos);
        for (char ch : p) CHECK((ch >= 0x20 && ch <= 0x7e));
    }
    CHECK(chars > 150000);
    // Chunks are whole paragraphs in order; every 5th is held out.
    CHECK(c.fit.size() + c.held_out.size() >= 200);
    CHECK(c.held_out.size() == (c.fit.size() + c.held_out.size()) / 5);
    CHECK(c.fit[0].rfind(c.paragraphs[0], 0) == 0);
    for (const std::string& ch : c.fit) CHECK(ch.size() >= 600);
    // Deterministic.
    const lk::FitCorpus again = lk::read_fit_corpus();
    CHECK(again.paragraphs == c.paragraphs);
    CHECK(again.held_out == c.held_out);
    // The gzip file cut off at 60 %: refused (it read as a shorter corpus, exit 0).
    std::ifstream gz(std::string(lk::fit_corpus_default_path), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(gz)), std::istreambuf_iterator<char>());
    const std::filesystem::path cut = std::filesystem::temp_directory_path() / ("hylens_cut_" + std::to_string(::getpid()) + ".txt.gz");
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 6 / 10);
    CHECK_THROWS_WITH_AS(lk::read_fit_corpus(cut.string()), doctest::Contains("ends before its gzip stream does"),
                         hylens::FormatError);
    std::filesystem::remove(cut);
}

TEST_CASE("stitch study forwards: an identity self-stitch is the model to float32 rounding, a zero bypass is removal") {
    TempDir d("stitch_identity");
    const fs::path dir = organism_copy("qwen35-tiny", d.path);
    const auto m = hylens::load_as<hylens::Qwen35Model>(dir);
    const hylens::Tokenizer tok = hylens::Tokenizer::from_file((dir / "tokenizer.json").string());
    const std::size_t H = m.config().hidden, V = m.config().vocab;
    const lk::Vocabulary vocab = lk::cross_family_vocabulary({&tok});
    const auto items = lk::query_items(tok, hylens::chat_format(hylens::ChatFamily::qwen35), lk::Style::chat, vocab, 4, 3, "t");
    const auto seqs = ex::held_out_sequences(tok, policy_corpus(), 2, 40);

    hylens::StitchPlan plan;
    plan.blocks.push_back({0, 1, {0, 1}, false});
    const auto self = hylens::stitch<hylens::LinearAdapter>(
        m, plan, m, {hylens::LinearAdapter{hylens::AffineMap::identity(H), hylens::AffineMap::identity(H)}});
    const ex::StitchForward intact = ex::plain_forward(m), stitched = ex::plain_forward(self);
    // The stitched slot writes h = fl(x + fl(B(x) - x)) where the intact model has B(x)
    // (x = resid_pre(0), B(x) = resid_post(1)); the identity maps are exact (gemm against I).
    // So the stitched model must equal, bit for bit, the intact model with that one rounding
    // applied to its residual after layer 1, and the intact model to float32 rounding.
    std::vector<float> x;
    hylens::Hook rounding;
    rounding.wants = [](hylens::Site s, hylens::LayerIndex l) {
        return (s == hylens::Site::resid_pre && l == 0) || (s == hylens::Site::resid_post && l == 1);
    };
    rounding.fn = [&](hylens::Site s, hylens::LayerIndex, const hylens::ActivationView& v, const std::int64_t*) {
        const std::size_t n = v.B * v.T * v.D;
        REQUIRE(v.ld == v.D);
        if (s == hylens::Site::resid_pre) {
            x.assign(v.data, v.data + n);
            return;
        }
        for (std::size_t i = 0; i < n; ++i) {
            const float d = v.data[i] - x[i];
            v.data[i] = x[i] + d;
        }
    };
    const ex::StitchForward rounded = [&](const hylens::TokenBatch& ids, bool last_only, std::vector<float>*) {
        auto cache = m.new_cache(1);
        hylens::ForwardOptions fo;
        fo.last_only = last_only;
        fo.hook = &rounding;
        return m.forward(ids, cache, fo);
    };
    double worst = 0.0;
    const auto same = [&](const hylens::Tensor3& plain, const hylens::Tensor3& r, const hylens::Tensor3& st) {
        REQUIRE(st.shape() == r.shape());
        CHECK(std::equal(st.data(), st.data() + st.size(), r.data()));
        double scale = 0.0, diff = 0.0;
        for (std::size_t i = 0; i < plain.size(); ++i) {
            scale = std::max(scale, std::abs(static_cast<double>(plain.data()[i])));
            diff = std::max(diff, std::abs(static_cast<double>(plain.data()[i]) - st.data()[i]));
        }
        worst = hylens::test::nan_max(worst, diff / scale);
        CHECK(diff <= 1e-3);  // T10 of the protocol (protocols.md §C.10)
    };
    for (const auto& it : items) {
        const hylens::TokenBatch ids(it.tokens.ids);
        const hylens::Tensor3 a = intact(ids, true, nullptr), b = stitched(ids, true, nullptr);
        same(a, rounded(ids, true, nullptr), b);
        const nlohmann::json ra = ex::score_lookup_row(hylens::logits_row(a), V, it.answer, it.value_ids);
        const nlohmann::json rb = ex::score_lookup_row(hylens::logits_row(b), V, it.answer, it.value_ids);
        CHECK(ra["answer"] == rb["answer"]);
    }
    for (const auto& s : seqs) {
        const hylens::TokenBatch ids(s);
        same(intact(ids, false, nullptr), rounded(ids, false, nullptr), stitched(ids, false, nullptr));
    }
    MESSAGE("identity self-stitch of qwen35-tiny layers 0-1: max |stitched - intact| / max |intact| = " << worst / kU << " u");

    // A bypass whose map is zero leaves h_in at resid_post(hi): bit for bit the removal.
    hylens::AffineMap zero_map = hylens::AffineMap::identity(H);
    std::fill(zero_map.W.begin(), zero_map.W.end(), 0.0f);
    const ex::StitchForward bypass = ex::bypass_forward(m, {ex::BypassSlot{{1, 2}, zero_map}});
    const ex::StitchForward removed = ex::intervened_forward(m, {hylens::skip_layers({1, 2})});
    for (const auto& it : items) {
        const hylens::TokenBatch ids(it.tokens.ids);
        const hylens::Tensor3 a = bypass(ids, false, nullptr), b = removed(ids, false, nullptr);
        REQUIRE(a.size() == b.size());
        CHECK(std::equal(a.data(), a.data() + a.size(), b.data()));
    }
}

TEST_CASE("layer ranges and conditions") {
    CHECK(ex::parse_layer_ranges("0-2,5") == std::vector<ex::LayerRange>{{0, 2}, {5, 5}});
    CHECK_THROWS(ex::parse_layer_range("2-1"));
    CHECK_THROWS(ex::parse_layer_range("a-b"));
    ex::StitchStudyOptions o;
    o.host_blocks = {{0, 1}};
    o.donor_blocks = {{0, 2}};
    CHECK(ex::stitch_conditions(o, 4) == std::vector<std::string>{"intact", "removed", "mixers_zeroed", "bypass", "stitched",
                                                                  "donor_no_mixing", "donor:3-3"});
    o.conditions = {"intact", "bogus"};
    CHECK_THROWS(ex::stitch_conditions(o, 4));
    o.conditions = {"donor:2-4"};
    CHECK_THROWS(ex::stitch_conditions(o, 4));
    CHECK_NOTHROW(ex::check_stitch_conditions(o.conditions, 1));  // the donor's layers not known yet
    CHECK_THROWS_WITH(ex::check_stitch_conditions({"stitched", "stitched"}, 1), doctest::Contains("given twice"));
    CHECK_THROWS_WITH(ex::check_stitch_conditions({"donor:2-4"}, 2), doctest::Contains("need a single-slot plan"));
    o.host_blocks = {{0, 0}, {1, 1}};
    o.donor_blocks = {{0, 0}, {1, 2}};
    o.conditions = {};
    CHECK(ex::stitch_conditions(o, 4).size() == 6);  // no other-block conditions for several slots
}

namespace {

struct Pair {
    hylens::AnyModel host, donor;
    hylens::Tokenizer host_tok, donor_tok;
    Pair(const fs::path& h, const fs::path& d)
        : host(hylens::load(h)), donor(hylens::load(d)), host_tok(hylens::Tokenizer::from_file((h / "tokenizer.json").string())),
          donor_tok(hylens::Tokenizer::from_file((d / "tokenizer.json").string())) {}
};

ex::StitchStudyOptions small(const fs::path& out) {
    ex::StitchStudyOptions o;
    o.host_blocks = {{0, 1}};
    o.donor_blocks = {{0, 2}};
    o.fit_prompts = 12;
    o.fit_tokens = 400;
    o.test_items = 5;
    o.ppl_seqs = 2;
    o.ppl_len = 24;
    o.seeds = {7};
    o.out = out;
    o.progress = false;
    o.bootstrap.resamples = 200;
    return o;
}

ex::StitchStudyResult run(const Pair& p, const ex::StitchStudyOptions& o) {
    return p.host.visit([&](const auto& h) {
        return p.donor.visit([&](const auto& d) {
            return ex::run_stitch_study(h, p.host_tok, ex::chat_family(p.host.config().model_type), d, p.donor_tok,
                                        ex::chat_family(p.donor.config().model_type), policy_corpus(), o);
        });
    });
}

/// The study `o` run as shards 0/n .. n-1/n into root/shard<s>.
std::vector<fs::path> run_shards(const Pair& p, const ex::StitchStudyOptions& o, const fs::path& root, std::size_t n) {
    std::vector<fs::path> out;
    for (std::size_t s = 0; s < n; ++s) {
        ex::StitchStudyOptions os = o;
        os.shard = {s, n};
        os.out = root / ("shard" + std::to_string(s));
        run(p, os);
        out.push_back(os.out);
    }
    return out;
}

}  // namespace

TEST_CASE("stitch study granite-h-tiny <- qwen35-tiny: records, intact == the host, determinism, shards, resume") {
    TempDir d("stitch_study");
    const Pair p(organism_copy("granite-h-tiny", d.path), organism_copy("qwen35-tiny", d.path));
    const ex::StitchStudyOptions o = small(d.path / "one");
    const ex::StitchStudyResult r = run(p, o);
    const std::vector<std::string> conds{"intact", "removed", "mixers_zeroed", "bypass", "stitched", "donor_no_mixing", "donor:3-3"};
    CHECK(r.records == (5 + 2) * conds.size());
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "run.json", "adapters.safetensors"})
        CHECK_MESSAGE(fs::exists(o.out / f), f);
    const nlohmann::json run_json = nlohmann::json::parse(read_text(o.out / "run.json"));
    CHECK(run_json["kind"] == "stitch");
    CHECK(run_json["status"] == "complete");
    CHECK(run_json["study"]["corpus"] == ex::stitch_corpus_digest(policy_corpus()));
    CHECK(run_json["corpus"] == fs::absolute(policy_corpus().source).string());
    CHECK(run_json["fits"]["stitched"].size() == 1);
    for (const char* c : {"stitched", "donor_no_mixing", "donor:3-3"}) {
        const double r2 = run_json["fits"][c][0]["m_in"]["r2"].get<double>();
        CHECK((std::isfinite(r2) && r2 <= 1.0));
    }

    // The intact records are the host's own forward on the same prompts.
    const auto& host = *p.host.get_if<hylens::GraniteModel>();
    const lk::Vocabulary vocab = lk::cross_family_vocabulary({&p.host_tok, &p.donor_tok});
    const lk::KeySplit split = lk::key_split(vocab.keys, o.seeds.front());
    const auto tests = lk::query_items(p.host_tok, hylens::chat_format(hylens::ChatFamily::granite4), lk::Style::chat,
                                       {split.test, vocab.values}, o.test_items, o.seeds.front(), "stitch-test");
    const auto seqs = ex::held_out_sequences(p.host_tok, policy_corpus(), o.ppl_seqs, o.ppl_len);
    const std::vector<nlohmann::json> recs = records_of(o.out);
    std::size_t checked = 0;
    std::vector<double> acc_intact;
    for (const nlohmann::json& rec : recs) {
        CHECK(rec["seed"] == o.seeds.front());
        if (rec["condition"] != "intact") continue;
        const std::size_t i = rec["item"].get<std::size_t>();
        if (rec["task"] == "lookup:chat8") {
            auto cache = host.new_cache(1);
            hylens::ForwardOptions last;
            last.last_only = true;  // the study reads the final row only (the head on one row)
            const hylens::Tensor3 lg = host.forward(hylens::TokenBatch(tests[i].tokens.ids), cache, last);
            const nlohmann::json want = ex::score_lookup_row(hylens::logits_row(lg), host.config().vocab, tests[i].answer,
                                                             tests[i].value_ids);
            for (const char* k : {"answer", "argmax", "acc", "cacc", "margin", "d_top"}) CHECK_MESSAGE(rec[k] == want[k], k);
            acc_intact.push_back(rec["acc"].get<double>());
        } else {
            REQUIRE(rec["task"] == "ppl");
            auto cache = host.new_cache(1);
            const hylens::TokenBatch ids(seqs[i]);
            CHECK(rec["nll"].get<std::vector<double>>() == hylens::token_nll(host.forward(ids, cache), ids));
            CHECK(rec["tokens"] == o.ppl_len - 1);
        }
        ++checked;
    }
    CHECK(checked == 7);
    // Every summary number comes from the records: the intact accuracy row is their mean.
    const nlohmann::json summary = nlohmann::json::parse(read_text(o.out / "summary.json"));
    double mean = 0.0;
    for (double a : acc_intact) mean += a / static_cast<double>(acc_intact.size());
    bool found = false;
    for (const auto& row : summary["rows"])
        if (row["task"] == "lookup:chat8" && row["condition"] == "intact" && row["metric"] == "acc") {
            CHECK(row["value"].get<double>() == doctest::Approx(mean).epsilon(1e-12));
            CHECK(row["n"] == 5);
            found = true;
        }
    CHECK(found);

    // Determinism: a second run writes the same bytes.
    ex::StitchStudyOptions o2 = o;
    o2.out = d.path / "two";
    run(p, o2);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"})
        CHECK_MESSAGE(read_text(o.out / f) == read_text(o2.out / f), f);

    // Shards 0/3, 1/3, 2/3 merged == the single run.
    const std::vector<fs::path> shards = run_shards(p, o, d.path, 3);
    const ex::MergeResult m = ex::merge_stitch_folders({shards[2], shards[0], shards[1]}, d.path / "merged");
    CHECK(m.records == r.records);
    CHECK(m.incomplete == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"})
        CHECK_MESSAGE(read_text(d.path / "merged" / f) == read_text(o.out / f), f);

    // A killed run (some records, then a torn line) resumed == the single run.
    const fs::path killed = d.path / "killed";
    fs::create_directories(killed);
    const std::string all = read_text(o.out / "items.jsonl");
    std::size_t cut = 0;
    for (int k = 0; k < 10; ++k) cut = all.find('\n', cut) + 1;
    write_text(killed / "items.jsonl", all.substr(0, cut) + all.substr(cut, 25));
    nlohmann::json running = hylens::test::as_killed(run_json);
    for (const char* k : {"fits", "fit_set", "vocabulary", "corpus_info"}) running.erase(k);
    write_text(killed / "run.json", running.dump(1));
    ex::StitchStudyOptions ok = o;
    ok.out = killed;
    ok.resume = true;
    const ex::StitchStudyResult rr = run(p, ok);
    CHECK(rr.resumed == 10);
    CHECK(rr.written == r.records - 10);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json"})
        CHECK_MESSAGE(read_text(killed / f) == read_text(o.out / f), f);

    // Without --resume a folder holding records is refused.
    std::string refused;
    try {
        run(p, o);
    } catch (const hylens::Error& e) {
        refused = e.what();
    }
    CHECK(refused.find("--resume") != std::string::npos);
}

TEST_CASE("stitch study over several seeds: each seed as its own run, the summary pools them with each seed's value") {
    TempDir d("stitch_seeds");
    const Pair p(organism_copy("granite-h-tiny", d.path), organism_copy("qwen35-tiny", d.path));
    ex::StitchStudyOptions o = small(d.path / "two");
    o.conditions = {"intact", "bypass", "stitched"};
    o.test_items = 3;
    o.ppl_seqs = 3;
    o.seeds = {7, 8};
    {
        ex::StitchStudyOptions twice = o;
        twice.out = d.path / "twice";
        twice.seeds = {7, 7};
        CHECK_THROWS_WITH_AS(run(p, twice), doctest::Contains("[stitch] seed 7 is listed twice"), hylens::Error);
    }
    const ex::StitchStudyResult r = run(p, o);
    CHECK(r.records == 2 * (3 + 3) * 3);
    // Each seed's records are those of a run of that seed alone: the seeds are independent.
    std::map<std::uint64_t, std::string> alone;
    std::map<std::uint64_t, nlohmann::json> alone_summary, alone_run;
    for (std::uint64_t seed : {7u, 8u}) {
        ex::StitchStudyOptions one = o;
        one.seeds = {seed};
        one.out = d.path / ("seed" + std::to_string(seed));
        run(p, one);
        alone[seed] = read_text(one.out / "items.jsonl");
        alone_summary[seed] = nlohmann::json::parse(read_text(one.out / "summary.json"));
        alone_run[seed] = nlohmann::json::parse(read_text(one.out / "run.json"));
    }
    std::map<std::uint64_t, std::string> mine;
    for (const std::string& line : [&] {
             std::vector<std::string> ls;
             std::istringstream in(read_text(o.out / "items.jsonl"));
             for (std::string l; std::getline(in, l);) ls.push_back(l);
             return ls;
         }())
        mine[nlohmann::json::parse(line)["seed"].get<std::uint64_t>()] += line + "\n";
    CHECK(mine[7] == alone[7]);
    CHECK(mine[8] == alone[8]);
    // run.json keys the fits, fit sets and vocabularies by seed.
    const nlohmann::json run_json = nlohmann::json::parse(read_text(o.out / "run.json"));
    CHECK(run_json["study"]["seeds"] == nlohmann::json::array({7, 8}));
    for (const char* seed : {"7", "8"}) {
        CHECK(run_json["fits"][seed] == alone_run[std::stoull(seed)]["fits"]);
        CHECK(run_json["vocabulary"][seed] == alone_run[std::stoull(seed)]["vocabulary"]);
    }
    CHECK(run_json["vocabulary"]["7"]["k_fit"] != run_json["vocabulary"]["8"]["k_fit"]);  // each seed redraws the split
    // The summary: each seed's value is that seed's own run's value, and sd_seeds their sd.
    const nlohmann::json summary = nlohmann::json::parse(read_text(o.out / "summary.json"));
    std::size_t rows = 0;
    for (const nlohmann::json& row : summary["rows"]) {
        CAPTURE(row.dump());
        CHECK(row["seeds"] == nlohmann::json::array({7, 8}));
        std::vector<double> per_seed;
        for (std::uint64_t seed : {7u, 8u})
            for (const nlohmann::json& a : alone_summary[seed]["rows"])
                if (a["task"] == row["task"] && a["condition"] == row["condition"] && a["metric"] == row["metric"]) {
                    CHECK(a["per_seed"].size() == 1);
                    CHECK(a["sd_seeds"].is_null());
                    per_seed.push_back(a["value"].get<double>());
                }
        REQUIRE(per_seed.size() == 2);
        CHECK(row["per_seed"][0].get<double>() == doctest::Approx(per_seed[0]).epsilon(1e-12));
        CHECK(row["per_seed"][1].get<double>() == doctest::Approx(per_seed[1]).epsilon(1e-12));
        CHECK(row["sd_seeds"].get<double>() == doctest::Approx(std::abs(per_seed[0] - per_seed[1]) / std::sqrt(2.0)).epsilon(1e-9));
        if (row["metric"] != "ppl")  // the pooled mean of equal-sized seeds is the mean of their means
            CHECK(row["value"].get<double>() == doctest::Approx((per_seed[0] + per_seed[1]) / 2).epsilon(1e-12));
        if (row["task"] == "ppl") {
            // Every seed scores the same sequences: they are the resampling unit, counted once.
            CHECK(row["n"] == o.ppl_seqs);
            if (row["condition"] == "intact")  // no map: the seeds agree, and so does the interval
                for (const nlohmann::json& a : alone_summary[7]["rows"])
                    if (a["task"] == "ppl" && a["condition"] == "intact" && a["metric"] == row["metric"])
                        for (const char* f : {"value", "lo", "hi", "n"}) CHECK(row[f] == a[f]);
        }
        ++rows;
    }
    CHECK(rows == 3 * (4 + 2));  // per condition: acc, cacc, margin, d_top; ppl, nll
    // The stitched perplexity by hand from the records: each sequence's mean NLL averaged over
    // the seeds (their maps differ), then over the sequences; the interval resamples sequences.
    {
        std::map<std::size_t, std::vector<double>> by_sequence;
        for (const nlohmann::json& rec : records_of(o.out))
            if (rec["task"] == "ppl" && rec["condition"] == "stitched") {
                double sum = 0.0;
                for (double x : rec["nll"].get<std::vector<double>>()) sum += x;
                by_sequence[rec["item"].get<std::size_t>()].push_back(sum / static_cast<double>(rec["nll"].size()));
            }
        REQUIRE(by_sequence.size() == 3);
        std::vector<double> means;
        for (const auto& [item, v] : by_sequence) {
            REQUIRE(v.size() == 2);
            CHECK(v[0] != v[1]);  // the seeds' maps differ
            means.push_back((v[0] + v[1]) / 2);
        }
        const double nll = (means[0] + means[1] + means[2]) / 3;
        const hylens::experiments::Interval want = hylens::mean_interval({means}, o.bootstrap);
        bool found = false;
        for (const nlohmann::json& row : summary["rows"])
            if (row["task"] == "ppl" && row["condition"] == "stitched" && row["metric"] == "ppl") {
                found = true;
                CHECK(row["value"].get<double>() == doctest::Approx(std::exp(nll)).epsilon(1e-12));
                CHECK(row["lo"].get<double>() == doctest::Approx(std::exp(want.lo)).epsilon(1e-12));
                CHECK(row["hi"].get<double>() == doctest::Approx(std::exp(want.hi)).epsilon(1e-12));
                CHECK(row["n"] == 3);
            }
        CHECK(found);
    }
    CHECK(read_text(o.out / "summary.csv").rfind("task,condition,metric,value,lo,hi,n,seeds,sd_seeds\n", 0) == 0);
    // Shards number the units across the seeds: merged, they are the unsharded run.
    const std::vector<fs::path> shards = run_shards(p, o, d.path, 3);
    ex::merge_stitch_folders(shards, d.path / "merged");
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"})
        CHECK_MESSAGE(read_text(d.path / "merged" / f) == read_text(o.out / f), f);
}

TEST_CASE("stitch study: two slots (exp34) fitted in order, falcon-h1-tiny as the host") {
    TempDir d("stitch_slots");
    const Pair p(organism_copy("falcon-h1-tiny", d.path), organism_copy("qwen35-tiny", d.path));
    ex::StitchStudyOptions o = small(d.path / "slots");
    o.host_blocks = {{0, 0}, {2, 3}};
    o.donor_blocks = {{0, 1}, {2, 2}};
    o.test_items = 3;
    o.ppl_seqs = 1;
    const ex::StitchStudyResult r = run(p, o);
    CHECK(r.records == (3 + 1) * 6);
    const nlohmann::json run_json = nlohmann::json::parse(read_text(o.out / "run.json"));
    CHECK(run_json["fits"]["stitched"].size() == 2);
    CHECK(run_json["fits"]["bypass"].size() == 2);
    CHECK(run_json["study"]["host_blocks"] == nlohmann::json::array({"0-0", "2-3"}));
}

TEST_CASE("stitch study: the host reader's attention on the queried entry (att_target) under every condition") {
    TempDir d("stitch_reader");
    const Pair p(organism_copy("granite-h-tiny", d.path), organism_copy("qwen35-tiny", d.path));
    ex::StitchStudyOptions o = small(d.path / "reader");
    o.conditions = {"intact", "removed", "bypass", "stitched"};
    o.test_items = 3;
    o.ppl_seqs = 1;
    o.reader = {2, 1};  // granite-h-tiny: mamba, mamba, attention, mamba; the slot is layers 0-1
    run(p, o);
    const auto& host = *p.host.get_if<hylens::GraniteModel>();
    const lk::Vocabulary vocab = lk::cross_family_vocabulary({&p.host_tok, &p.donor_tok});
    const auto tests = lk::query_items(p.host_tok, hylens::chat_format(hylens::ChatFamily::granite4), lk::Style::chat,
                                       {lk::key_split(vocab.keys, o.seeds.front()).test, vocab.values}, o.test_items, o.seeds.front(),
                                       "stitch-test");
    std::size_t seen = 0;
    for (const nlohmann::json& rec : records_of(o.out)) {
        if (rec["task"] == "ppl") {
            CHECK(!rec.contains("att_target"));
            continue;
        }
        ++seen;
        const double att = rec["att_target"].get<double>();
        CHECK((att >= 0.0 && att <= 1.0 + 1e-6));
        if (rec["condition"] != "intact") continue;
        // Intact: the host's own attention row, captured by run() (another path than the study's hook).
        const auto& t = tests[rec["item"].get<std::size_t>()];
        const hylens::SiteRef probs = hylens::site::attn_probs(2, hylens::Positions::last());
        hylens::RunOptions ro;
        ro.capture = {probs};
        ro.last_only = true;
        const hylens::RunResult r = hylens::run(host, hylens::TokenBatch(t.tokens.ids), {}, ro);
        std::size_t Tk = 0;
        const float* row = hylens::probs_row(r.captures.at(probs.name()), 0, 1, 0, Tk);
        CHECK(att == hylens::attention_mass(row, Tk, hylens::contiguous_span(t.tokens.entries[t.query])));
    }
    CHECK(seen == 3 * 4);
    const nlohmann::json run_json = nlohmann::json::parse(read_text(o.out / "run.json"));
    CHECK(run_json["study"]["reader"] == nlohmann::json{{"layer", 2}, {"head", 1}});
    const nlohmann::json summary = nlohmann::json::parse(read_text(o.out / "summary.json"));
    std::size_t rows = 0;
    for (const auto& row : summary["rows"]) rows += row["metric"] == "att_target" ? 1 : 0;
    CHECK(rows == 4);
    // A reader the conditions would replace, or one without softmax attention, is refused.
    o.out = d.path / "bad";
    o.reader = {2, 0};
    o.host_blocks = {{1, 2}};
    CHECK_THROWS_WITH_AS(run(p, o), doctest::Contains("the reader layer 2 lies in the host block 1-2"), hylens::Error);
    o.host_blocks = {{0, 1}};
    o.reader = {3, 0};
    CHECK_THROWS_WITH_AS(run(p, o), doctest::Contains("has no softmax attention"), hylens::Error);
    // No fit data for conditions that fit adapters: refused before the result folder is made.
    o.reader = {};
    o.fit_prompts = 0;
    o.fit_tokens = 0;
    CHECK_THROWS_WITH_AS(run(p, o), doctest::Contains("--fit-prompts 0 with --fit-tokens 0 leaves nothing to fit them on"),
                         hylens::Error);
    CHECK_FALSE(fs::exists(o.out / "run.json"));
    o.conditions = {"intact", "removed"};  // nothing to fit: runs
    CHECK_NOTHROW(run(p, o));
}

#ifdef HYLENS_CLI
using hylens::test::kCli;
using hylens::test::sh;

TEST_CASE("hylens experiment stitch: usage errors, a run equal to the library's, merge by kind, the figure") {
    TempDir d("stitch_cli");
    const fs::path host = organism_copy("granite-h-tiny", d.path), donor = organism_copy("qwen35-tiny", d.path);
    const std::string base = kCli + " experiment stitch --host " + host.string() + " --donor " + donor.string() +
                             " --no-progress ";
    const std::string quiet = " 2>" + (d.path / "err.txt").string();
    const std::string blocks = " --host-block 0-1 --donor-block 0-2 ";
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --bogus 1" + quiet) == 2);
    CHECK(sh(base + "--host-block 0-1 --donor-block 0-2,3 --out " + (d.path / "x").string() + quiet) == 2);
    CHECK(sh(base + "--host-block 1-0 --donor-block 0-2 --out " + (d.path / "x").string() + quiet) == 2);
    // Condition names are usage errors, before the models load (it was exit 1, after the load).
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --conditions intact,nope" + quiet) == 2);
    CHECK(read_text(d.path / "err.txt").find("unknown condition 'nope'") != std::string::npos);
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --conditions intact,intact" + quiet) == 2);
    CHECK(read_text(d.path / "err.txt").find("condition 'intact' given twice") != std::string::npos);
    // A donor:A-B past the donor's layers needs the donor: an error of the run.
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --conditions donor:9-9" + quiet) == 1);
    CHECK(read_text(d.path / "err.txt").find("condition donor:9-9: the donor has 4 layers") != std::string::npos);
    CHECK(!fs::exists(d.path / "x" / "items.jsonl"));
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --reader 2" + quiet) == 2);  // not LAYER:HEAD
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --reader 1:0 --test-items 1 --ppl-seqs 1" + quiet) == 1);
    CHECK(read_text(d.path / "err.txt").find("the reader layer 1 has no softmax attention") != std::string::npos);
    CHECK(sh(kCli + " experiment --help | grep -q stitch") == 0);
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --seed 1 --seeds 1,2" + quiet) == 2);  // one or the other
    CHECK(sh(base + blocks + "--out " + (d.path / "x").string() + " --seeds 3,3" + quiet) == 2);
    CHECK(read_text(d.path / "err.txt").find("seed 3 is listed twice") != std::string::npos);

    const std::string args = blocks + "--fit-prompts 12 --fit-tokens 400 --test-items 5 --ppl-seqs 2 --ppl-len 24 --seed 7 ";
    const fs::path s0 = d.path / "s0", s1 = d.path / "s1", merged = d.path / "merged";
    REQUIRE(sh(base + args + "--shard 0/2 --out " + s0.string() + quiet) == 0);
    REQUIRE(sh(base + args + "--shard 1/2 --out " + s1.string() + quiet) == 0);
    REQUIRE(sh(kCli + " experiment merge " + s1.string() + " " + s0.string() + " --out " + merged.string() + quiet) == 0);
    const Pair p(host, donor);
    ex::StitchStudyOptions o = small(d.path / "lib");
    o.bootstrap = {};
    run(p, o);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"})
        CHECK_MESSAGE(read_text(merged / f) == read_text(o.out / f), f);

    if (hylens::test::figure_scripts_can_run()) {
        CHECK(sh("/usr/bin/python3 " + std::string(HYLENS_SOURCE_DIR) + "/scripts/plot_stitch.py " + merged.string() +
                 " --out " + (d.path / "fig.png").string() + quiet) == 0);
        CHECK(fs::exists(d.path / "fig.png"));
    }
}
#endif

TEST_CASE("stitch study: a tokenizer without a token of its chat format is refused before the folder is made") {
    TempDir d("stitch_specials");
    const fs::path donor = organism_copy("qwen35-tiny", d.path);
    const std::string without = hylens::test::tokenizer_without(donor / "tokenizer.json", "<think>");
    std::ofstream(donor / "tokenizer.json") << without;
    const Pair p(organism_copy("granite-h-tiny", d.path), donor);
    REQUIRE_FALSE(p.donor_tok.token_to_id("<think>").has_value());
    CHECK_THROWS_WITH_AS(run(p, small(d.path / "out")),
                         doctest::Contains("[chat] the donor's tokenizer has no token '<think>'"), hylens::FormatError);
    CHECK_FALSE(fs::exists(d.path / "out"));
}

TEST_CASE("stitch study: a host that produces a NaN stops the study at the layer and site (no null scores)") {
    TempDir d("stitch_nan");
    const fs::path host = organism_copy("granite-h-tiny", d.path);
    const fs::path bad = hylens::test::damaged_model(host, d.path / "damaged", "model.layers.1.shared_mlp.output_linear.weight");
    fs::copy_file(host / "tokenizer.json", bad / "tokenizer.json");
    const Pair p(bad, organism_copy("qwen35-tiny", d.path));
    ex::StitchStudyOptions o = small(d.path / "out");
    CHECK_THROWS_WITH_AS(run(p, o), doctest::Contains("first non-finite value (nan) at layer 1, site mlp_out"), hylens::NonFiniteError);
    CHECK_FALSE(fs::exists(d.path / "out" / "summary.json"));
}
