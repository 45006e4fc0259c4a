// The one translation unit that holds doctest's main (compiled once, linked into every suite).
//
// ctest runs each TEST_CASE as `suite --test-case=NAME` (doctest_discover_tests). A name the
// filter does not match runs nothing, and doctest then exits 0: a test that cannot fail. That
// happened to every name with a semicolon (CMake splits the list of names there), 31 test
// cases that ctest reported passed without running them until 2026-12-05. So a run whose
// filters leave no test case is a failure here, whatever made it so.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>  // std::fprintf

namespace {

// How many test cases the run's filters let through (doctest's own count), once the run ends.
struct RunCount {
    bool ended = false;
    unsigned passing_filters = 0;
};
RunCount& run_count() {
    static RunCount c;
    return c;
}

// A listener (a reporter that runs beside the console one) that keeps that count.
struct CountListener : doctest::IReporter {
    explicit CountListener(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& s) override {
        run_count().ended = true;
        run_count().passing_filters = s.numTestCasesPassingFilters;
    }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("hylens_run_count", 1, CountListener);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit() || !run_count().ended) return rc;  // --help, --list-test-cases, ...
    if (run_count().passing_filters == 0) {
        std::fprintf(stderr, "[hylens tests] no test case matches the filters given: nothing ran\n");
        return rc == 0 ? 1 : rc;
    }
    return rc;
}
