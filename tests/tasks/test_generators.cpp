// Task generators: deterministic (golden items of seed 1, checked by hand once), seeds and
// indices give different items, the registry, and Item <-> JSON.

#include <hylens/tasks/item_json.hpp>
#include <hylens/tasks/registry.hpp>
#include <hylens/tasks/rng.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

using namespace hylens;
using namespace hylens::tasks;

namespace {
/// The tasks with their own generator (the :lexicon variants share them).
const std::vector<std::string> kBaseTasks = {"dictionary", "list", "language", "persona",
                                             "mixed", "label", "drm", "conjunction"};
}  // namespace

TEST_CASE("tasks: the first items of seed 1 equal the checked-in golden file") {
    std::ifstream in(std::string(HYLENS_TASKS_DATA_DIR) + "/seed1_first3.jsonl");
    REQUIRE(in.good());
    std::string line;
    std::map<std::string, std::size_t> per_task;
    while (std::getline(in, line)) {
        const nlohmann::json want = nlohmann::json::parse(line);
        const Item got = find_task(want.at("task").get<std::string>()).make(want.at("seed"), want.at("index"));
        INFO(line);
        CHECK(item_to_json(got) == want);
        ++per_task[want.at("task").get<std::string>()];
    }
    for (const std::string& t : kBaseTasks) CHECK_MESSAGE(per_task[t] == 3, t);
}

TEST_CASE("tasks: the same (seed, index) gives the same item, other seeds and indices give others") {
    for (const std::string& name : kBaseTasks) {
        INFO(name);
        const TaskSpec& t = find_task(name);
        std::set<std::string> contexts;
        std::size_t same_as_seed2 = 0;
        for (std::size_t i = 0; i < 40; ++i) {
            const Item a = t.make(1, i), b = t.make(1, i), c = t.make(2, i);
            CHECK(item_to_json(a) == item_to_json(b));
            CHECK(a.task == name);
            CHECK(a.seed == 1);
            CHECK(a.index == i);
            same_as_seed2 += a.context + a.query == c.context + c.query;
            contexts.insert(a.context + a.query);
        }
        // Independent draws from these vocabularies collide rarely.
        CHECK(same_as_seed2 <= 2);
        CHECK(contexts.size() >= 38);
    }
    // The :lexicon variants generate exactly the items of their base task.
    for (const char* base : {"language", "mixed", "label"}) {
        const TaskSpec& a = find_task(base);
        const TaskSpec& b = find_task(std::string(base) + ":lexicon");
        for (std::size_t i = 0; i < 5; ++i) CHECK(item_to_json(a.make(3, i)) == item_to_json(b.make(3, i)));
    }
}

TEST_CASE("tasks: the PRNG is splitmix64 with fixed outputs") {
    // Reference splitmix64 (Vigna) from state 0: the first output is 0xe220a8397b1dcdaf.
    std::uint64_t state = 0x9e3779b97f4a7c15ULL;
    CHECK(mix64(state) == 0xe220a8397b1dcdafULL);
    // below() stays in range and reaches every value; sample() draws distinct indices.
    TaskRng rng(1, "test", 0);
    std::set<std::size_t> seen;
    for (int i = 0; i < 1000; ++i) {
        const std::size_t v = rng.below(7);
        CHECK(v < 7);
        seen.insert(v);
    }
    CHECK(seen.size() == 7);
    const std::vector<std::size_t> s = rng.sample(40, 9);
    CHECK(std::set<std::size_t>(s.begin(), s.end()).size() == 9);
    CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
    CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
}

TEST_CASE("tasks: registry lists every task and names the known ones on a miss") {
    const std::vector<std::string> names = task_names();
    CHECK(names == std::vector<std::string>{"dictionary", "list", "language", "language:lexicon", "persona", "mixed",
                                            "mixed:lexicon", "label", "label:lexicon", "drm", "conjunction"});
    for (const std::string& n : names) {
        const TaskSpec& t = find_task(n);
        CHECK(t.name == n);
        CHECK(static_cast<bool>(t.make));
        CHECK(static_cast<bool>(t.score));
        CHECK(!t.description.empty());
        CHECK(t.max_new > 0);
    }
    for (const char* n : {"dictionary", "list", "language", "persona", "mixed", "label"}) CHECK(find_task(n).swap);
    for (const char* n : {"drm", "conjunction"}) CHECK(!find_task(n).swap);
    try {
        find_task("dictionnary");
        FAIL("no error for an unknown task");
    } catch (const Error& e) {
        const std::string what = e.what();
        CHECK(what.find("dictionnary") != std::string::npos);
        for (const std::string& n : names) CHECK(what.find(n) != std::string::npos);
    }
}

TEST_CASE("tasks: Item JSON round trip and bad JSON") {
    for (const std::string& name : kBaseTasks) {
        const Item a = find_task(name).make(5, 3);
        const Item b = item_from_json(nlohmann::json::parse(item_to_json(a).dump()));
        CHECK(item_to_json(b) == item_to_json(a));
        CHECK(b.spans.size() == a.spans.size());
    }
    nlohmann::json j = item_to_json(find_task("drm").make(1, 0));
    j.erase("query");
    CHECK_THROWS_AS(item_from_json(j), FormatError);
    j = item_to_json(find_task("drm").make(1, 0));
    j["seed"] = "one";
    CHECK_THROWS_AS(item_from_json(j), FormatError);
}
