// `hylens tasks`: JSON lines equal the generators' items; --list; unknown options, unknown
// tasks and bad values are usage errors (exit code 2). Built only when the tool is (HYLENS_CLI).

#ifdef HYLENS_CLI
#include <hylens/tasks/item_json.hpp>
#include <hylens/tasks/registry.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/wait.h>  // WEXITSTATUS

namespace {
/// Runs a command; returns (exit code, stdout).
std::pair<int, std::string> run(const std::string& args) {
    const std::string cmd = std::string(HYLENS_CLI) + " " + args + " 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
}  // namespace

TEST_CASE("cli: hylens tasks --json prints the generators' items, one per line") {
    const auto [rc, out] = run("tasks --task drm,mixed --seeds 3,4 --items 2 --start 5 --json");
    REQUIRE(rc == 0);
    std::string want;
    for (const char* t : {"drm", "mixed"})
        for (const std::uint64_t seed : {3, 4})
            for (std::size_t i = 5; i < 7; ++i)
                want += hylens::tasks::item_to_json(hylens::tasks::find_task(t).make(seed, i)).dump() + "\n";
    CHECK(out == want);
    const auto [rc_text, text] = run("tasks --task list --items 1");
    CHECK(rc_text == 0);
    CHECK(text.find(hylens::tasks::find_task("list").make(1, 0).query) != std::string::npos);
    const auto [rc_list, list] = run("tasks --list");
    CHECK(rc_list == 0);
    for (const std::string& n : hylens::tasks::task_names()) CHECK(list.find(n) != std::string::npos);
}

TEST_CASE("cli: hylens tasks rejects unknown options, unknown tasks and bad values") {
    CHECK(run("tasks --task drm --bogus").first == 2);
    CHECK(run("tasks --task nosuchtask").first == 2);
    CHECK(run("tasks --task drm --items many").first == 2);
    CHECK(run("tasks --task drm --seeds 1,x").first == 2);
    CHECK(run("tasks").first == 2);
    CHECK(run("tasks --help").first == 0);
}
#endif
