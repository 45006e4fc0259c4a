// Scorers on hand-written cases: normalisation and exact match, the yes/no parser, CLD2 and
// the lexicon on real sentences, and each task's score under the channel sources of the
// study's conditions (FULL, KV-only, REC-only, NONE, the swaps).

#include <hylens/tasks/language_id.hpp>
#include <hylens/tasks/normalize.hpp>
#include <hylens/tasks/persona.hpp>
#include <hylens/tasks/registry.hpp>
#include <hylens/tasks/yes_no.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace hylens;
using namespace hylens::tasks;

namespace {

constexpr ScoreContext kFull{Source::A, Source::A};
constexpr ScoreContext kKvOnly{Source::A, Source::none};
constexpr ScoreContext kRecOnly{Source::none, Source::A};
constexpr ScoreContext kNone{Source::none, Source::none};
constexpr ScoreContext kKvARecB{Source::A, Source::B};
constexpr ScoreContext kKvBRecA{Source::B, Source::A};
constexpr ScoreContext kRecOnlyB{Source::none, Source::B};

Score score(const std::string& task, const Item& item, const std::string& generated, const ScoreContext& ctx,
            Judge* judge = nullptr) {
    return find_task(task).score(item, generated, ctx, judge);
}

Item hand_item(const std::string& task, std::vector<std::string> expected, std::vector<std::string> alt_expected,
               nlohmann::json fields) {
    Item item;
    item.task = task;
    item.context = "A";
    item.alt_context = alt_expected.empty() ? "" : "B";
    item.expected = std::move(expected);
    item.alt_expected = std::move(alt_expected);
    item.fields = std::move(fields);
    return item;
}

}  // namespace

TEST_CASE("scorers: answer normalisation and exact match") {
    CHECK(normalize_answer("  **Green**.\nWhat else?") == "green");
    CHECK(normalize_answer("\n\n  \"Light   Blue!\"  ") == "light blue");
    CHECK(normalize_answer("...") == "");
    CHECK(normalize_answer("") == "");
    CHECK(normalize_answer("Ÿes É") == "ÿes é");
    CHECK(answer_line("\n \n  red\nblue") == "  red");
    CHECK(exact_match("Green.", {"green"}));
    CHECK(exact_match(" owl\n", {"owl"}));
    CHECK(!exact_match("The value is green.", {"green"}));
    CHECK(!exact_match("greens", {"green"}));
    CHECK(!exact_match("", {""}));
    CHECK(contains_words("The value is green.", "green"));
    CHECK(!contains_words("The value is greenish.", "green"));
    CHECK(!contains_words("first line\ngreen", "green"));  // only the answer line counts
    CHECK(words("Je l'aime, très-bien 42!") == std::vector<std::string>{"je", "l", "aime", "très", "bien", "42"});
    CHECK(words("我认为") == std::vector<std::string>{"我", "认", "为"});
    CHECK(word_count("Answer only in French.") == 4);
}

TEST_CASE("scorers: yes/no parser") {
    CHECK(parse_yes_no("Yes") == YesNo::yes);
    CHECK(parse_yes_no("yes.") == YesNo::yes);
    CHECK(parse_yes_no(" **Yes**, it was.") == YesNo::yes);
    CHECK(parse_yes_no("Yeah") == YesNo::yes);
    CHECK(parse_yes_no("No") == YesNo::no);
    CHECK(parse_yes_no("no, it was not in the list") == YesNo::no);
    CHECK(parse_yes_no("Nope.") == YesNo::no);
    CHECK(parse_yes_no("Not in the list.") == YesNo::no);
    CHECK(parse_yes_no("I think yes") == YesNo::yes);
    CHECK(parse_yes_no("The answer is no.") == YesNo::no);
    CHECK(parse_yes_no("Yes and no") == YesNo::yes);  // the first word decides
    CHECK(parse_yes_no("It is yes and no") == YesNo::unknown);
    CHECK(parse_yes_no("Maybe") == YesNo::unknown);
    CHECK(parse_yes_no("yesterday") == YesNo::unknown);
    CHECK(parse_yes_no("nothing") == YesNo::unknown);
    CHECK(parse_yes_no("") == YesNo::unknown);
    CHECK(parse_yes_no("\n\nno") == YesNo::no);
}

TEST_CASE("scorers: CLD2 on real sentences of several languages") {
    // Sentences written for this test (none is an answer sentence of the tasks).
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"en", "The committee will publish its final report on the new railway line next spring."},
        {"fr", "Le gouvernement a annoncé hier une nouvelle loi sur la protection de l'environnement."},
        {"de", "Die Stadtverwaltung hat beschlossen, im nächsten Jahr mehrere neue Schulen zu bauen."},
        {"es", "El museo abrirá una exposición sobre la historia de la ciudad durante el verano."},
        {"it", "Il comune ha deciso di chiudere il centro storico alle automobili durante il fine settimana."},
        {"pt", "A empresa anunciou que vai contratar mais trabalhadores para a nova fábrica no próximo ano."},
        {"nl", "De gemeente wil volgend jaar meer fietspaden aanleggen in het centrum van de stad."},
        {"pl", "Władze miasta postanowiły wybudować nowy most na rzece w przyszłym roku."},
        {"ru", "Правительство объявило о строительстве новой железной дороги между двумя городами."},
        {"ja", "東京の天気は明日から雨になるそうなので、傘を持って出かけてください。"},
        {"zh", "这个城市明年将修建一座新的图书馆和两所学校。"},
        {"tr", "Belediye gelecek yıl şehir merkezinde yeni bir park yapmaya karar verdi."},
    };
    for (const auto& [code, text] : cases) {
        INFO(text);
        const LanguageGuess g = detect_language_cld2(text);
        CHECK(g.code == code);
        CHECK(g.reliable);
    }
    CHECK(detect_language_cld2("").code == "un");
    CHECK(detect_language_cld2(std::string("\xff\xfe broken")).code == "un");
}

TEST_CASE("scorers: the lexicon identifies fragments of the answer sentences") {
    CHECK(detect_language_lexicon("Je pense que oui").code == "fr");
    CHECK(detect_language_lexicon("gefällt mir").code == "de");
    CHECK(detect_language_lexicon("molto sicuro").code == "it");
    CHECK(detect_language_lexicon("y estoy muy seguro").code == "es");
    CHECK(detect_language_lexicon("I am sure of it").code == "en");
    CHECK(detect_language_lexicon("очень нравится").code == "ru");
    CHECK(detect_language_lexicon("red").code == "un");
    CHECK(detect_language_lexicon("").code == "un");
    CHECK(detect_language_lexicon("pense gefällt").code == "un");  // a tie
    CHECK(!detect_language_lexicon("pense").reliable);
    CHECK(detect_language_lexicon("pense beaucoup").reliable);
}

TEST_CASE("scorers: dictionary / list score the answer of the KV channel's source") {
    const Item item = hand_item("dictionary", {"owl"}, {"fox"}, {{"key", "lamp"}, {"value", "owl"}, {"alt_value", "fox"}});
    CHECK(score("dictionary", item, "owl", kFull).score == 1.0);
    CHECK(score("dictionary", item, " Owl.\n", kKvOnly).score == 1.0);
    CHECK(score("dictionary", item, "fox", kFull).score == 0.0);
    CHECK(score("dictionary", item, "owl", kKvARecB).score == 1.0);
    CHECK(score("dictionary", item, "owl", kKvBRecA).score == 0.0);
    CHECK(score("dictionary", item, "fox", kKvBRecA).score == 1.0);
    CHECK(score("dictionary", item, "fox", kRecOnlyB).score == 1.0);  // no KV: the recurrent source
    CHECK(score("dictionary", item, "owl", kNone).score == 1.0);      // nothing: source A
    const Score s = score("dictionary", item, "The value is fox.", kKvARecB);
    CHECK(s.score == 0.0);
    CHECK(s.fields["exact_a"] == false);
    CHECK(s.fields["exact_b"] == false);
    CHECK(s.fields["contains_b"] == true);
    CHECK(s.fields["follows"] == "neither");
    CHECK(s.fields["source"] == "A");
    CHECK(score("dictionary", item, "fox", kKvBRecA).fields["follows"] == "B");
    // An item without a B source refuses a condition that takes a channel from B.
    const Item no_b = hand_item("list", {"owl"}, {}, {});
    CHECK(score("list", no_b, "owl", kFull).score == 1.0);
    CHECK_THROWS_AS(score("list", no_b, "owl", kKvBRecA), Error);
}

TEST_CASE("scorers: language scores the language of the recurrent channel's source") {
    const Item item = hand_item("language", {"x"}, {"y"}, {{"language", "French"}, {"language_code", "fr"},
                                                          {"alt_language", "German"}, {"alt_language_code", "de"}});
    const std::string fr = "Bien sûr, je vais au marché tous les samedis avec ma sœur.";
    const std::string de = "Natürlich gehe ich jeden Samstag mit meiner Schwester auf den Markt.";
    CHECK(score("language", item, fr, kFull).score == 1.0);
    CHECK(score("language", item, de, kFull).score == 0.0);
    CHECK(score("language", item, de, kKvARecB).score == 1.0);
    CHECK(score("language", item, fr, kKvBRecA).score == 1.0);
    CHECK(score("language", item, fr, kKvOnly).score == 1.0);  // no recurrent channel: the KV source
    CHECK(score("language", item, de, kRecOnlyB).score == 1.0);
    const Score s = score("language", item, de, kFull);
    CHECK(s.fields["detected"] == "de");
    CHECK(s.fields["lang_a"] == false);
    CHECK(s.fields["lang_b"] == true);
    CHECK(s.fields["language_id"] == "cld2");
    // The lexicon variant reads fragments of the fixed sentences that CLD2 cannot place.
    CHECK(score("language:lexicon", item, "je pense que", kFull).score == 1.0);
    CHECK(score("language:lexicon", item, "je pense que", kFull).fields["language_id"] == "lexicon");
    CHECK(score("language:lexicon", item, "ich denke", kKvARecB).score == 1.0);
    CHECK(score("language", item, "", kFull).score == 0.0);
}

TEST_CASE("scorers: mixed: value from KV, language from REC, both") {
    const Item item = hand_item("mixed", {"La réponse est owl, et j'en suis très sûr."},
                                {"Die Antwort ist fox, und ich bin mir sicher."},
                                {{"value", "owl"}, {"alt_value", "fox"}, {"language", "French"}, {"language_code", "fr"},
                                 {"alt_language", "German"}, {"alt_language_code", "de"}});
    Score s = score("mixed", item, "La réponse est owl, et j'en suis très sûr.", kFull);
    CHECK(s.score == 1.0);
    CHECK(s.fields["value_from_kv"] == true);
    CHECK(s.fields["language_from_rec"] == true);
    // KV_A + REC_B: A's value in B's language is the dissociation the study looks for.
    s = score("mixed", item, "Die Antwort ist owl, und ich bin mir sicher.", kKvARecB);
    CHECK(s.score == 1.0);
    CHECK(s.fields["value_source"] == "A");
    CHECK(s.fields["language_source"] == "B");
    s = score("mixed", item, "La réponse est owl, et j'en suis très sûr.", kKvARecB);
    CHECK(s.score == 0.0);
    CHECK(s.fields["value_from_kv"] == true);
    CHECK(s.fields["language_from_rec"] == false);
    s = score("mixed", item, "Die Antwort ist owl oder fox, und ich bin mir sicher.", kKvARecB);
    CHECK(s.fields["value_from_kv"] == false);  // both values: not the KV source's value
    CHECK(score("mixed:lexicon", item, "ist fox, und ich", kKvBRecA).fields["value_from_kv"] == true);
    CHECK(score("mixed:lexicon", item, "ist fox, und ich", kKvBRecA).fields["language_from_rec"] == false);
}

TEST_CASE("scorers: label: naming the language vs answering in it") {
    const nlohmann::json f = {{"language", "Polish"}, {"language_code", "pl"}, {"alt_language", "Czech"},
                              {"alt_language_code", "cs"}};
    nlohmann::json name = f, answer = f;
    name["condition"] = "name";
    answer["condition"] = "answer";
    const Item n = hand_item("label", {"Polish"}, {"Czech"}, name);
    CHECK(score("label", n, "Polish.", kFull).score == 1.0);
    CHECK(score("label", n, "You should answer in Polish", kFull).score == 1.0);
    CHECK(score("label", n, "Polish or Czech", kFull).score == 0.0);
    CHECK(score("label", n, "Czech", kKvARecB).score == 1.0);
    CHECK(score("label", n, "Polski", kFull).score == 0.0);
    CHECK(names_language("I speak English", "English"));
    const Item a = hand_item("label", {"x"}, {"y"}, answer);
    CHECK(score("label", a, "Wczoraj poszliśmy z rodziną na długi spacer po lesie.", kFull).score == 1.0);
    CHECK(score("label", a, "Polish", kFull).score == 0.0);
}

namespace {
/// Says yes to a question that holds `yes_to` (never, when it is empty); keeps every question.
struct FixedJudge final : Judge {
    std::string yes_to;
    std::vector<std::string> asked;
    bool yes(std::string_view question) override {
        asked.emplace_back(question);
        return !yes_to.empty() && question.find(yes_to) != std::string_view::npos;
    }
};
}  // namespace

TEST_CASE("scorers: persona rule rubric and judge") {
    const Item item = hand_item("persona", {"x"}, {"y"}, {{"persona", "pirate"}, {"alt_persona", "chef"}});
    CHECK(score("persona", item, "Arr, I love the sea!", kFull).score == 1.0);
    CHECK(score("persona", item, "I like to read.", kFull).score == 0.0);
    CHECK(score("persona", item, "I cook soup on my ship.", kFull).score == 0.0);  // chef 2 markers > pirate 1
    CHECK(score("persona", item, "I cook soup on my ship.", kKvARecB).score == 1.0);
    CHECK(score("persona", item, "Arr, soup.", kFull).score == 0.0);  // a tie is no persona
    const Score s = score("persona", item, "Ahoy matey, gold!", kFull);
    CHECK(s.fields["markers"] == nlohmann::json{"ahoy", "matey", "gold"});
    CHECK(s.fields["rubric_a"] == true);
    CHECK(s.fields["rubric_b"] == false);
    CHECK(!s.fields.contains("judge"));
    FixedJudge judge;
    Score j = score("persona", item, "Ahoy matey, gold!", kFull, &judge);
    CHECK(j.score == 0.0);  // the judge decides when there is one
    CHECK(j.fields["rubric"] == true);
    CHECK(j.fields["judge"] == false);
    // It is asked about both personas, A's first, as the rubric is scored against both.
    REQUIRE(judge.asked.size() == 2);
    CHECK(judge.asked[0].find("\"Ahoy matey, gold!\"") != std::string::npos);
    CHECK(judge.asked[0].find("a pirate?") != std::string::npos);
    CHECK(judge.asked[1].find("a chef?") != std::string::npos);
    judge.yes_to = "a chef?";
    j = score("persona", item, "I like to read.", kKvARecB, &judge);
    CHECK(j.score == 1.0);  // the control source of KV_A + REC_B is B
    CHECK(j.fields["judge"] == true);
    CHECK(j.fields["judge_a"] == false);
    CHECK(j.fields["judge_b"] == true);
    j = score("persona", item, "I like to read.", kFull, &judge);
    CHECK(j.score == 0.0);  // FULL is scored against A
    CHECK(j.fields["judge_b"] == true);
}

TEST_CASE("scorers: drm / conjunction: yes/no against the probe, false and true positives") {
    for (const char* task : {"drm", "conjunction"}) {
        const Item absent = hand_item(task, {"no"}, {}, {{"condition", "associated-absent"}});
        const Item present = hand_item(task, {"yes"}, {}, {{"condition", "present"}});
        Score s = score(task, absent, "Yes, it was.", kFull);
        CHECK(s.score == 0.0);
        CHECK(s.fields["false_positive"] == 1);
        CHECK(s.fields["answer"] == "yes");
        CHECK(!s.fields.contains("true_positive"));
        s = score(task, absent, "No.", kKvOnly);
        CHECK(s.score == 1.0);
        CHECK(s.fields["false_positive"] == 0);
        s = score(task, absent, "I cannot tell.", kFull);
        CHECK(s.score == 0.0);
        CHECK(s.fields["false_positive"] == 0);
        CHECK(s.fields["answer"] == "unknown");
        s = score(task, present, "yes", kRecOnly);
        CHECK(s.score == 1.0);
        CHECK(s.fields["true_positive"] == 1);
        s = score(task, present, "no", kNone);
        CHECK(s.score == 0.0);
        CHECK(s.fields["true_positive"] == 0);
        CHECK_THROWS_AS(score(task, present, "yes", kKvARecB), Error);
    }
}
