#include <hylens/core/thread_pool.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>    // kill, SIGKILL
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // fork, _exit

using namespace hylens;

TEST_CASE("thread pool: parallel_for covers every index exactly once") {
    for (std::size_t n : {0u, 1u, 2u, 3u, 17u, 1000u}) {
        std::vector<std::atomic<int>> hits(n);
        parallel_for(n, [&](std::size_t b, std::size_t e) {
            for (std::size_t i = b; i < e; ++i) hits[i]++;
        });
        for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 1);
    }
}

TEST_CASE("thread pool: more parts than threads cover every index once, no more ranges than n / grain") {
    auto& pool = ThreadPool::instance();
    const std::size_t before = pool.size();
    for (std::size_t threads : {1u, 2u, 3u})
        for (std::size_t per_thread : {1u, 4u})
            for (std::size_t n : {1u, 5u, 31u, 100u, 1000u})
                for (std::size_t grain : {1u, 7u, 64u}) {
                    pool.resize(threads);
                    std::vector<std::atomic<int>> hits(n);
                    std::atomic<std::size_t> ranges{0};
                    pool.parallel_for(
                        n,
                        [&](std::size_t b, std::size_t e) {
                            ranges++;
                            for (std::size_t i = b; i < e; ++i) hits[i]++;
                        },
                        grain, per_thread);
                    INFO("threads " << threads << " per thread " << per_thread << " n " << n << " grain " << grain);
                    for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 1);
                    CHECK(ranges.load() <= (threads == 1 ? 1 : threads * per_thread));
                    CHECK(ranges.load() <= (n + grain - 1) / grain);
                }
    pool.resize(before);
}

TEST_CASE("thread pool: for_each_row and for_each_element visit every row and element once") {
    auto& pool = ThreadPool::instance();
    const std::size_t before = pool.size();
    for (std::size_t threads : {1u, 2u, 3u})
        for (std::size_t rows : {0u, 1u, 3u, 70u})
            for (std::size_t row_values : {1u, 5u, 1024u, 40000u}) {  // row_grain: 32768 rows .. 1 row a range
                pool.resize(threads);
                INFO("threads " << threads << " rows " << rows << " row values " << row_values);
                std::vector<std::atomic<int>> row_hits(rows), hits(rows * row_values);
                for_each_row(rows, row_values, [&](std::size_t r) { row_hits[r]++; });
                for_each_element(rows, row_values, [&](std::size_t i) { hits[i]++; });
                for (const auto& h : row_hits) REQUIRE(h.load() == 1);
                for (const auto& h : hits) REQUIRE(h.load() == 1);
            }
    pool.resize(before);
}

TEST_CASE("thread pool: nested parallel_for runs inline and stays correct") {
    std::atomic<long> sum{0};
    parallel_for(8, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) {
            parallel_for(10, [&](std::size_t b2, std::size_t e2) {
                for (std::size_t j = b2; j < e2; ++j) sum += static_cast<long>(i * 10 + j);
            });
        }
    });
    CHECK(sum.load() == 79 * 80 / 2);
}

TEST_CASE("thread pool: the size cannot change after first use") {
    ThreadPool::instance();
    CHECK_THROWS_AS(ThreadPool::set_num_threads(3), Error);
}

TEST_CASE("thread pool: back-to-back regions of varying sizes, at several pool sizes") {
    // Regions follow each other closely (workers still spinning on the previous one), or after a
    // pause longer than the spin (workers asleep), and their number of parts changes between
    // them: every index must still be covered exactly once.
    auto& pool = ThreadPool::instance();
    const std::size_t before = pool.size();
    const bool auto_before = pool.spin_is_auto();
    const int spin_before = pool.spin_micros();
    for (std::size_t threads : {1u, 2u, 3u, 4u})
      for (int spin : {0, 100, -1}) {  // -1: the automatic mode
        pool.resize(threads);
        if (spin < 0)
            pool.set_spin_auto();
        else
            pool.set_spin_micros(spin);
        std::vector<std::atomic<int>> hits(64);
        for (int round = 0; round < 2000; ++round) {
            const std::size_t n = 1 + static_cast<std::size_t>(round * 7) % 64;
            if (round % 200 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
            pool.parallel_for(n, [&](std::size_t b, std::size_t e) {
                for (std::size_t i = b; i < e; ++i) hits[i]++;
            });
            for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].exchange(0) == 1);
        }
      }
    pool.resize(before);
    if (auto_before)
        pool.set_spin_auto();
    else
        pool.set_spin_micros(spin_before);
    CHECK_THROWS_AS(pool.set_spin_micros(-1), Error);
}

TEST_CASE("thread pool: a worker that starts late still joins the first region after a resize") {
    // Each of two parts waits (up to 5 s) for the other to start: only two threads can meet.
    // The worker's thread may start after the region is published; it used to take that
    // region's generation as seen and leave both parts to the caller, one after the other.
    auto& pool = ThreadPool::instance();
    const std::size_t before = pool.size();
    for (int round = 0; round < 3; ++round) {
        pool.resize(1);
        pool.resize(2);
        std::atomic<int> started{0};
        std::atomic<int> met{0};
        parallel_for(
            2,
            [&](std::size_t, std::size_t) {
                started.fetch_add(1);
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
                if (started.load() == 2) met.fetch_add(1);
            },
            1, 1);
        CHECK(met.load() == 2);
    }
    pool.resize(before);
}

TEST_CASE("thread pool: region statistics count the regions, the caller's wait at their ends and the time between") {
    auto& pool = ThreadPool::instance();
    const std::size_t before = pool.size();
    using namespace std::chrono_literals;
    pool.resize(2);
    pool.reset_region_stats();
    // A range run inline (one part) is not a region.
    parallel_for(1, [](std::size_t, std::size_t) {});
    CHECK(pool.region_stats().regions == 0);
    // Two parts that meet before either returns, so each runs on its own thread; the worker's
    // then sleeps 200 ms and the caller's returns: the caller waits for the worker's part.
    const auto caller = std::this_thread::get_id();
    std::atomic<int> started{0};
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(
        2,
        [&](std::size_t, std::size_t) {
            started.fetch_add(1);
            while (started.load() < 2) std::this_thread::yield();
            if (std::this_thread::get_id() != caller) std::this_thread::sleep_for(200ms);
        },
        1, 1);
    std::this_thread::sleep_for(50ms);  // serial work between two regions
    parallel_for(2, [](std::size_t, std::size_t) {}, 1, 1);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const ThreadPool::RegionStats st = pool.region_stats();
    CHECK(st.regions == 2);
    CHECK(st.between_seconds >= 0.05);  // steady clock: at least the sleep
    CHECK(st.wait_seconds >= 0.1);      // 200 ms less the caller's own (instant) part, with a margin
    CHECK(st.wait_seconds + st.between_seconds <= elapsed);
    pool.reset_region_stats();
    CHECK(pool.region_stats().regions == 0);
    CHECK(pool.region_stats().wait_seconds == 0);
    // Called from inside a region: an error, not a deadlock.
    std::atomic<int> threw{0};
    parallel_for(
        2,
        [&](std::size_t, std::size_t) {
            try {
                (void)pool.region_stats();
            } catch (const std::exception&) {
                threw.fetch_add(1);
            }
        },
        1, 1);
    CHECK(threw.load() == 2);
    pool.resize(before);
}

TEST_CASE("thread pool: the automatic polling rule and its reading of /proc/loadavg") {
    CHECK(ThreadPool::runnable_in_loadavg("0.52 0.58 0.59 3/245 4242") == 3);
    CHECK(ThreadPool::runnable_in_loadavg("12.00 9.50 7.25 17/1024 99") == 17);
    CHECK(ThreadPool::runnable_in_loadavg("") == -1);
    CHECK(ThreadPool::runnable_in_loadavg("0.52 0.58") == -1);
    CHECK(ThreadPool::runnable_in_loadavg("0.52 0.58 0.59 x/245 1") == -1);
    CHECK(ThreadPool::runnable_in_loadavg("0.52 0.58 0.59 3 1") == -1);
    // (runnable, ours, threads, cores)
    CHECK(ThreadPool::cores_to_spare(2, 2, 2, 2));       // only our two threads run
    CHECK(ThreadPool::cores_to_spare(1, 1, 2, 2));       // our worker asleep, nothing else
    CHECK_FALSE(ThreadPool::cores_to_spare(3, 2, 2, 2));  // one other task wants a core
    CHECK_FALSE(ThreadPool::cores_to_spare(2, 1, 2, 2));
    CHECK(ThreadPool::cores_to_spare(6, 2, 4, 8));       // 4 others + 4 threads on 8 cores
    CHECK_FALSE(ThreadPool::cores_to_spare(7, 2, 4, 8));
    CHECK(ThreadPool::cores_to_spare(0, 1, 1, 1));       // a count read before ours were counted
    // The verdict over the checks (2 threads, 2 cores): a reading with no core to spare stops
    // the polling only when kAutoBusyChecks of them come in a row; one with cores to spare
    // starts it again at once; an unreadable /proc/loadavg blocks at once.
    static_assert(ThreadPool::kAutoBusyChecks == 3);
    ThreadPool::AutoPollRule rule;
    CHECK(rule.update(2, 2, 2, 2));        // quiet
    CHECK(rule.update(3, 2, 2, 2));        // one busy reading (a kernel thread, a woken worker)
    CHECK(rule.update(2, 2, 2, 2));        // quiet again: the streak starts over
    CHECK(rule.update(2, 1, 2, 2));        // busy 1
    CHECK(rule.update(4, 2, 2, 2));        // busy 2
    CHECK_FALSE(rule.update(3, 2, 2, 2));  // busy 3: block
    CHECK_FALSE(rule.update(2, 1, 2, 2));  // still busy: still blocking
    CHECK(rule.update(1, 1, 2, 2));        // cores to spare: poll
    CHECK_FALSE(rule.update(-1, 2, 2, 2));  // no reading: block
    CHECK_FALSE(rule.update(3, 2, 2, 2));  // ...and a busy reading right after keeps blocking
    CHECK(rule.update(2, 2, 2, 2));
    // In the automatic mode the polling time is one of the two the rule chooses from.
    auto& pool = ThreadPool::instance();
    const bool auto_before = pool.spin_is_auto();
    const int spin_before = pool.spin_micros();
    pool.set_spin_micros(7);
    CHECK_FALSE(pool.spin_is_auto());
    CHECK(pool.spin_micros() == 7);
    pool.set_spin_auto();
    CHECK(pool.spin_is_auto());
    pool.parallel_for(64, [](std::size_t, std::size_t) {});
    CHECK((pool.spin_micros() == 0 || pool.spin_micros() == ThreadPool::kAutoSpinMicros));
    if (!auto_before) pool.set_spin_micros(spin_before);
}

TEST_CASE("thread pool: the default size is the cores of the affinity mask, HYLENS_THREADS overrides it") {
    const std::size_t all = ThreadPool::available_cores();
    CHECK(all >= 1);
#if defined(__linux__)
    // A thread bound to one CPU sees one core (hardware_concurrency() ignores the binding:
    // under taskset the pool had a thread per machine core).
    std::size_t seen = 0;
    std::thread t([&] {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
        int first = 0;
        while (!CPU_ISSET(first, &mine)) ++first;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
        seen = ThreadPool::available_cores();
    });
    t.join();
    CHECK(seen == 1);
#endif
    const char* before = std::getenv("HYLENS_THREADS");
    const std::string saved = before ? before : "";
    ::unsetenv("HYLENS_THREADS");
    CHECK(ThreadPool::threads_from_env() == 0);
    ::setenv("HYLENS_THREADS", "3", 1);
    CHECK(ThreadPool::threads_from_env() == 3);
    for (const char* bad : {"0", "-2", "two", "3x", "5000", " 2", "+2", "2 ", "99999999999999999999"}) {
        ::setenv("HYLENS_THREADS", bad, 1);
        CHECK_THROWS_WITH_AS(ThreadPool::threads_from_env(),
                             doctest::Contains("HYLENS_THREADS must be a whole number from 1 to 4096"), Error);
    }
    if (before) ::setenv("HYLENS_THREADS", saved.c_str(), 1);
    else ::unsetenv("HYLENS_THREADS");
}

TEST_CASE("thread pool: a child forked while another thread is in a region runs its regions on its own thread") {
    // Only the forking thread lives on in a child: the region's lock stayed held by a thread
    // that no longer existed, and the child's first region waited for it for ever
    // (multiprocessing's fork pools beside a forward in another thread).
    auto& pool = ThreadPool::instance();
    const std::size_t before = pool.size();
    pool.resize(2);
    std::atomic<bool> inside{false}, release{false};
    std::thread busy([&] {
        parallel_for(
            2,
            [&](std::size_t, std::size_t) {
                inside = true;
                while (!release) std::this_thread::yield();
            },
            1, 1);
    });
    while (!inside) std::this_thread::yield();  // the region (and its lock) is held now
    std::fflush(nullptr);                         // nothing buffered is written twice
    const pid_t pid = ::fork();
    if (pid == 0) {  // the child: no doctest here, the exit status says it all
        std::atomic<std::size_t> covered{0};
        parallel_for(100, [&](std::size_t b, std::size_t e) { covered += e - b; }, 1, 4);
        const int code = covered == 100 && ThreadPool::forked_child() && ThreadPool::instance().size() == 1 ? 0 : 1;
#if defined(__SANITIZE_ADDRESS__)
        // LeakSanitizer would read the parent's worker threads' states as leaks in the child
        // (the stacks that own them are not a live thread's); the Release build runs the exit.
        ::_exit(code);
#else
        // exit, not _exit: the static destructors run, as at a child's normal end (destroying
        // the pool's condition variables waited for the parent's workers: a hang at exit).
        std::exit(code);
#endif
    }
    release = true;
    busy.join();
    REQUIRE(pid > 0);
    int status = 0;
    pid_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((got = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (got == 0) {  // hung: the failure this test is for
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
    }
    CHECK(got == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_FALSE(ThreadPool::forked_child());  // the parent keeps its threads
    CHECK(pool.size() == 2);
    pool.resize(before);
}
