#pragma once
// One process-wide thread pool. Its size is set once before first use: HYLENS_THREADS=N in the
// environment, else set_num_threads(n), else the cores this process may run on
// (available_cores(): its CPU affinity, so taskset, cpusets and Slurm's binding count). parallel_for splits [0, n) into contiguous ranges; the calling thread takes part.
// A parallel_for called from inside a pool task runs inline (no nested parallelism), so a
// kernel may use it freely. OpenBLAS is kept at one thread (core/blas.hpp): BLAS calls and
// our pool never run two sets of threads at the same time (on 2 cores, OpenBLAS's spinning
// workers made our pool 1.7x slower).
//
// Waiting: a decode step opens ~100-200 short parallel regions a token (one per group of
// projections, kernels/linear.hpp), a few microseconds apart, and waking a thread blocked on a
// condition variable costs a futex wake and a reschedule. An idle worker can first poll for the
// next region for spin_micros() (and the caller for the last part) before it blocks. Polling
// pays when the pool has the cores to itself (50 us: 2-thread decode 1.02-1.33x on a quiet
// 2-core machine) and loses when other processes want them (100 us: 0.53-0.98x at load 7-10),
// since the polling thread takes time they need. So by default the pool decides (automatic
// mode): at most every 100 ms the caller reads the number of runnable tasks in /proc/loadavg,
// and the pool polls kAutoSpinMicros while the tasks that are not its own leave a core to each
// of its threads, else blocks at once (and always where /proc/loadavg is missing). One reading
// that finds no core to spare does not stop the polling, kAutoBusyChecks in a row do
// (AutoPollRule): a single reading is often wrong on a quiet machine, since a worker just woken
// still counts as asleep and a kernel thread may be runnable for a moment, and when one such
// reading made the pool block, the woken workers kept it blocking (20-35 % of the regions of a
// decode-like stream at 2 threads on a quiet machine; docs/performance.md).
// HYLENS_POOL_SPIN_US=N (0 to 10000) or set_spin_micros(N) fixes the time instead
// (docs/performance.md).
//
// After fork: only the forking thread lives on in the child, so the workers are gone and the
// lock of a region another thread was running is held for ever. A child forked from a process
// whose pool had started (a pthread_atfork handler marks it) runs every region on its calling
// thread; the results are those of any thread count (they do not depend on it). A child hung in
// its first region when another thread was in one at the fork (multiprocessing's fork pools).
//
// Parts are claimed as tickets [base_, end_) of a counter that only grows, by compare-and-swap
// below end_: a thread still finishing the previous region can neither take a part twice nor
// take one of a region whose number of parts differs before that region is published.

#include <algorithm>           // std::min, std::max
#include <atomic>              // std::atomic
#include <chrono>              // std::chrono::steady_clock
#include <condition_variable>  // std::condition_variable
#include <cstddef>             // std::size_t
#include <cstdint>             // std::uint64_t
#include <charconv>            // std::from_chars
#include <cstdlib>             // std::getenv
#include <cstring>             // std::strlen
#include <system_error>        // std::errc
#include <functional>          // std::function
#include <mutex>               // std::mutex
#include <string>              // std::string
#include <string_view>         // std::string_view
#include <thread>              // std::thread
#include <vector>              // std::vector

#include "error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _mm_pause
#endif
#if defined(__linux__) && __has_include(<sched.h>)
#include <sched.h>  // sched_getaffinity, CPU_COUNT
#define HYLENS_POOL_AFFINITY 1
#else
#define HYLENS_POOL_AFFINITY 0
#endif
#if defined(__unix__) && __has_include(<pthread.h>)
#include <pthread.h>  // pthread_atfork
#define HYLENS_POOL_ATFORK 1
#else
#define HYLENS_POOL_ATFORK 0
#endif
#if __has_include(<unistd.h>)
#include <fcntl.h>   // ::open (the automatic polling's /proc/loadavg)
#include <unistd.h>  // ::read, ::close
#define HYLENS_POOL_LOADAVG 1
#else
#define HYLENS_POOL_LOADAVG 0  // no /proc/loadavg to read: the automatic mode blocks
#endif

namespace hylens {

class ThreadPool {
public:
    /// How long an idle thread polls in the automatic mode (the default; see above) while the
    /// machine leaves a core to each pool thread. The environment variable HYLENS_POOL_SPIN_US
    /// (0 to 10000, or "auto") sets the mode when the pool is created, set_spin_micros /
    /// set_spin_auto at any time.
    static constexpr int kAutoSpinMicros = 50;
    /// Consecutive checks (100 ms apart) that find no core to spare before the automatic mode
    /// stops polling; one that finds cores to spare starts it again.
    static constexpr int kAutoBusyChecks = 3;

    /// The automatic mode's verdict over its checks: update() takes one reading of /proc/loadavg
    /// (runnable tasks, -1 if unreadable) and says whether to poll until the next check.
    struct AutoPollRule {
        int busy_streak = 0;  // consecutive readings that found no core to spare
        constexpr bool update(long runnable, std::size_t ours, std::size_t threads, std::size_t cores) noexcept {
            if (runnable < 0) {  // nothing to go by: block
                busy_streak = kAutoBusyChecks;
                return false;
            }
            if (cores_to_spare(static_cast<std::size_t>(runnable), ours, threads, cores)) {
                busy_streak = 0;
                return true;
            }
            busy_streak = std::min(busy_streak + 1, kAutoBusyChecks);
            return busy_streak < kAutoBusyChecks;
        }
    };

    /// Fixes the microseconds an idle thread polls before blocking (0: block at once).
    void set_spin_micros(int us) {
        check(us >= 0 && us <= 10000, "[ThreadPool] the spin time must be 0 to 10000 microseconds");
        spin_us_.store(us, std::memory_order_relaxed);
    }
    /// Back to the automatic mode.
    void set_spin_auto() noexcept { spin_us_.store(kAutoSpin, std::memory_order_relaxed); }
    bool spin_is_auto() const noexcept { return spin_us_.load(std::memory_order_relaxed) == kAutoSpin; }
    /// Microseconds an idle thread polls now: the fixed time, or in the automatic mode
    /// kAutoSpinMicros while the last check found a core for each pool thread, else 0.
    int spin_micros() const noexcept {
        const int us = spin_us_.load(std::memory_order_relaxed);
        return us != kAutoSpin ? us : auto_poll_.load(std::memory_order_relaxed) ? kAutoSpinMicros : 0;
    }

    /// Whether the `runnable` tasks of the machine (of which `ours` are this pool's) leave a
    /// core to each of the pool's `threads`, on `cores` cores: the automatic mode's rule.
    static constexpr bool cores_to_spare(std::size_t runnable, std::size_t ours, std::size_t threads,
                                         std::size_t cores) noexcept {
        return (runnable > ours ? runnable - ours : 0) + threads <= cores;
    }
    /// The runnable-task count in the text of /proc/loadavg ("0.52 0.58 0.59 3/245 4242": 3), or
    /// -1 if the text is not of that form.
    static long runnable_in_loadavg(std::string_view text) noexcept {
        std::size_t fields = 0, i = 0;
        while (i < text.size() && fields < 3) {  // skip the three load averages
            while (i < text.size() && text[i] != ' ') ++i;
            while (i < text.size() && text[i] == ' ') ++i;
            ++fields;
        }
        long r = 0;
        std::size_t digits = 0;
        for (; fields == 3 && i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 9; ++i, ++digits)
            r = r * 10 + (text[i] - '0');
        return digits > 0 && i < text.size() && text[i] == '/' ? r : -1;
    }

    /// The process-wide pool, created on first use, destroyed at exit, except in a forked child:
    /// its condition variables had the parent's sleeping workers as waiters, and destroying one
    /// waits for them to leave (glibc), so a child that exited normally hung in the destructor.
    static ThreadPool& instance() {
        static ThreadPool* pool = new ThreadPool(threads_from_env() ? threads_from_env() : requested_size());
        static const struct Reaper {
            ThreadPool* p;
            ~Reaper() {
                if (!forked_child()) delete p;
            }
        } reaper{pool};
        return *pool;
    }

    /// Sets the pool size; allowed only before the pool is first used (throws otherwise).
    /// HYLENS_THREADS, when set, wins over it.
    static void set_num_threads(std::size_t n) {
        check(n >= 1, "[ThreadPool] the number of threads must be >= 1");
        check(!started(), "[ThreadPool] set_num_threads must be called before the pool is first used");
        requested_size() = n;
    }

    /// The cores this process may run on: the CPUs of its affinity mask (taskset, cpusets,
    /// Slurm's binding), else the machine's (std::thread::hardware_concurrency, which ignores
    /// the mask); at least 1.
    static std::size_t available_cores() {
#if HYLENS_POOL_AFFINITY
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
            return static_cast<std::size_t>(CPU_COUNT(&set));
#endif
        return std::max(1u, std::thread::hardware_concurrency());
    }

    /// HYLENS_THREADS from the environment: 0 when unset, else a whole number in [1, 4096]
    /// (anything else is an error naming the variable).
    static std::size_t threads_from_env() {
        const char* env = std::getenv("HYLENS_THREADS");
        if (env == nullptr || *env == '\0') return 0;
        std::size_t n = 0;  // from_chars: digits only (no sign, space or suffix), overflow an error
        const char* end = env + std::strlen(env);
        const auto [p, ec] = std::from_chars(env, end, n);
        check(ec == std::errc() && p == end && n >= 1 && n <= 4096,
              "[ThreadPool] HYLENS_THREADS must be a whole number from 1 to 4096, got '" + std::string(env) + "'");
        return n;
    }

    /// The threads that take part in a region: 1 in a child forked after the pool started.
    std::size_t size() const noexcept { return forked_child() ? 1 : workers_.size() + 1; }

    /// Whether this process was forked from one whose pool had started: its regions run on the
    /// calling thread (see the top of this header).
    static bool forked_child() noexcept { return forked_flag().load(std::memory_order_relaxed); }

    /// What the parallel regions (parallel_for calls split over more than one thread) cost the
    /// calling thread since reset_region_stats(): how many ran, the time the caller waited at
    /// their ends for the other threads' last parts, and the time from the end of one region to
    /// the start of the next (the caller's serial work, while the other threads have none).
    /// `hylens bench` reports them per decode token (docs/performance.md, "`hylens bench`").
    /// Three clock readings a region (~0.1 us).
    struct RegionStats {
        std::uint64_t regions = 0;
        double wait_seconds = 0;
        double between_seconds = 0;
    };
    /// (Neither may be called from inside a parallel region: throws.)
    RegionStats region_stats() {
        check(!in_worker(), "[ThreadPool] region_stats called from inside a parallel region");
        if (forked_child()) return stats_;  // no region runs on another thread
        std::lock_guard<std::mutex> one_job(job_mutex_);
        return stats_;
    }
    void reset_region_stats() {
        check(!in_worker(), "[ThreadPool] reset_region_stats called from inside a parallel region");
        if (forked_child()) {
            stats_ = {};
            return;
        }
        std::lock_guard<std::mutex> one_job(job_mutex_);
        stats_ = {};
        last_region_end_ = {};
    }

    /// Changes the number of threads of a running pool (benchmarks sweep 1, 2, ... threads in
    /// one process). Must not be called from inside a parallel_for (throws); waits for a
    /// running parallel region to end.
    void resize(std::size_t n) {
        check(n >= 1, "[ThreadPool] the number of threads must be >= 1");
        check(!in_worker(), "[ThreadPool] resize called from inside a parallel region");
        check(!forked_child(), "[ThreadPool] resize in a process forked after the pool started: its workers did not survive ",
              "the fork, and it runs on one thread");
        std::lock_guard<std::mutex> one_job(job_mutex_);
        if (n == size()) return;
        stop_workers();
        stop_.store(false, std::memory_order_seq_cst);
        start_workers(n);
    }

    /// Calls fn(begin, end) on contiguous ranges of one length (the last shorter) covering [0, n),
    /// at most n / grain (rounded up) and parts_per_thread x size() of them. The threads claim
    /// ranges as they come free, so more ranges than threads let the others take over the share
    /// of a thread that starts late (woken late, or its core busy with another process).
    template <class F>
    void parallel_for(std::size_t n, F&& fn, std::size_t grain = 1, std::size_t parts_per_thread = 1) {
        if (n == 0) return;
        grain = std::max<std::size_t>(grain, 1);
        const std::size_t max_parts = (n + grain - 1) / grain;
        const std::size_t per_thread = std::max<std::size_t>(parts_per_thread, 1);
        const std::size_t parts = size() == 1 ? 1 : std::min(max_parts, size() * per_thread);
        if (parts <= 1 || in_worker()) {  // a forked child's size() is 1: one part, inline
            fn(std::size_t{0}, n);
            return;
        }
        std::lock_guard<std::mutex> one_job(job_mutex_);  // one parallel region at a time
        // The part captures one pointer, which std::function stores in place: no allocation
        // per parallel region (a decode step opens ~100 of them).
        struct Region {
            std::size_t n, per;
            F& fn;
        } region{n, (n + parts - 1) / parts, fn};
        std::function<void(std::size_t)> part = [r = &region](std::size_t p) {
            const std::size_t b = p * r->per;
            const std::size_t e = std::min(r->n, b + r->per);
            if (b < e) r->fn(b, e);
        };
        run(parts, part);
    }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;
    ~ThreadPool() { stop_workers(); }  // never in a forked child (instance())

private:
    void stop_workers() {
        {
            std::lock_guard<std::mutex> lk(mutex_);
            stop_.store(true, std::memory_order_seq_cst);
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
    }

    explicit ThreadPool(std::size_t n) {
        started() = true;
#if HYLENS_POOL_ATFORK
        static const bool marks_children =
            ::pthread_atfork(nullptr, nullptr, [] { forked_flag().store(true, std::memory_order_relaxed); }) == 0;
        (void)marks_children;
#endif
        if (const char* env = std::getenv("HYLENS_POOL_SPIN_US"); env && std::string(env) != "auto") {
            char* end = nullptr;
            const long us = std::strtol(env, &end, 10);
            check(end != env && *end == '\0' && us >= 0 && us <= 10000,
                  "[ThreadPool] HYLENS_POOL_SPIN_US must be an integer from 0 to 10000 or 'auto', got '" +
                      std::string(env) + "'");
            spin_us_.store(static_cast<int>(us), std::memory_order_relaxed);
        }
        start_workers(n);
    }

    // Starts the n - 1 workers (no region in flight: the constructor, or resize under
    // job_mutex_). Each starts from the generation of now, not of when its thread first runs:
    // a thread that starts late (tens of microseconds) then still joins the region published
    // meanwhile, where it used to take that generation as seen and leave the whole first region
    // to the caller.
    void start_workers(std::size_t n) {
        const std::uint64_t now = generation_.load(std::memory_order_acquire);
        for (std::size_t i = 1; i < n; ++i) workers_.emplace_back([this, now] { worker_loop(now); });
    }

    static std::size_t& requested_size() {
        static std::size_t n = available_cores();
        return n;
    }
    static bool& started() {
        static bool s = false;
        return s;
    }
    static std::atomic<bool>& forked_flag() noexcept {
        static std::atomic<bool> f{false};
        return f;
    }
    static bool& in_worker() {
        thread_local bool w = false;
        return w;
    }

    // The automatic mode's check, at most every 100 ms (the caller, under job_mutex_): our tasks
    // are the caller and the workers not asleep.
    void check_cores() {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_check_ < std::chrono::milliseconds(100)) return;
        last_check_ = now;
        // POSIX read into a stack buffer: no allocation inside a decode step (tests/alloc).
        long runnable = -1;
#if HYLENS_POOL_LOADAVG
        char buf[128];
        if (const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC); fd >= 0) {
            const ssize_t got = ::read(fd, buf, sizeof buf);
            ::close(fd);
            if (got > 0) runnable = runnable_in_loadavg(std::string_view(buf, static_cast<std::size_t>(got)));
        }
#endif
        const std::size_t asleep = static_cast<std::size_t>(std::max(sleepers_.load(std::memory_order_relaxed), 0));
        const std::size_t ours = size() - std::min(asleep, size() - 1);
        static const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());  // /proc/loadavg is the machine's
        auto_poll_.store(auto_rule_.update(runnable, ours, size(), cores), std::memory_order_relaxed);
    }

    static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
        __asm__ __volatile__("yield" ::: "memory");  // the spin-wait hint (Linux's cpu_relax on arm64)
#else
        std::this_thread::yield();
#endif
    }

    // Polls done() for up to spin_micros(); true if it became true.
    template <class Done>
    bool spin_until(Done&& done) const {
        const int us = spin_micros();
        if (us == 0) return done();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
        for (;;) {
            for (int i = 0; i < 64; ++i) {
                if (done()) return true;
                cpu_relax();
            }
            if (std::chrono::steady_clock::now() >= deadline) return done();
        }
    }

    // Publishes a job of `parts` parts as the tickets [base_, end_), works on it, waits for it.
    void run(std::size_t parts, std::function<void(std::size_t)>& part) {
        using Clock = std::chrono::steady_clock;
        const Clock::time_point start = Clock::now();
        if (last_region_end_ != Clock::time_point{})
            stats_.between_seconds += std::chrono::duration<double>(start - last_region_end_).count();
        ++stats_.regions;
        if (spin_is_auto()) check_cores();
        job_.store(&part, std::memory_order_relaxed);
        pending_.store(parts, std::memory_order_relaxed);
        const std::size_t base = next_.load(std::memory_order_relaxed);  // == end_: all claimed
        base_.store(base, std::memory_order_relaxed);
        end_.store(base + parts, std::memory_order_release);
        generation_.fetch_add(1, std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) > 0) {
            std::lock_guard<std::mutex> lk(mutex_);  // a worker between its check and its wait sees this
        }
        cv_.notify_all();
        in_worker() = true;
        work_on_current();
        in_worker() = false;
        const Clock::time_point own_done = Clock::now();
        if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
            std::unique_lock<std::mutex> lk(mutex_);
            // With the worker's fetch_sub of pending_ and load of caller_waiting_ this is a
            // Dekker handshake: one of the two sides must see the other's write. Each side writes
            // with a read-modify-write (an exchange here, not a store): both are seq_cst either
            // way, but QEMU's user-mode emulation of aarch64 on an x86 host runs a seq_cst store
            // followed by a seq_cst load (STLR; LDAR) without a fence between them, so with a
            // store both sides could read the old values and the caller sleep forever (seen
            // under scripts/test-aarch64.sh); an exchange is a locked instruction on the host.
            (void)caller_waiting_.exchange(true, std::memory_order_seq_cst);
            done_cv_.wait(lk, [&] { return pending_.load(std::memory_order_seq_cst) == 0; });
            caller_waiting_.store(false, std::memory_order_relaxed);
        }
        job_.store(nullptr, std::memory_order_relaxed);
        last_region_end_ = Clock::now();
        stats_.wait_seconds += std::chrono::duration<double>(last_region_end_ - own_done).count();
    }

    void work_on_current() {
        for (;;) {
            std::size_t t = next_.load(std::memory_order_acquire);
            const std::size_t end = end_.load(std::memory_order_acquire);
            if (t >= end) return;
            if (!next_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
            // end_ was read after its release: base_ and job_ are this region's.
            (*job_.load(std::memory_order_relaxed))(t - base_.load(std::memory_order_relaxed));
            if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_waiting_.load(std::memory_order_seq_cst)) {
                std::lock_guard<std::mutex> lk(mutex_);
                done_cv_.notify_all();
            }
        }
    }

    void worker_loop(std::uint64_t seen) {
        in_worker() = true;
        for (;;) {
            auto news = [&] {
                // seq_cst: pairs with run()'s generation bump and sleepers_ check (either the
                // worker sees the new region, or run() sees it asleep and wakes it)
                return stop_.load(std::memory_order_seq_cst) || generation_.load(std::memory_order_seq_cst) != seen;
            };
            if (!spin_until(news)) {
                std::unique_lock<std::mutex> lk(mutex_);
                sleepers_.fetch_add(1, std::memory_order_seq_cst);
                cv_.wait(lk, news);
                sleepers_.fetch_sub(1, std::memory_order_relaxed);
            }
            if (stop_.load(std::memory_order_acquire)) return;
            seen = generation_.load(std::memory_order_acquire);
            work_on_current();
        }
    }

    std::vector<std::thread> workers_;
    std::mutex mutex_;      // guards the condition-variable waits only
    std::mutex job_mutex_;  // one parallel region at a time
    std::condition_variable cv_;
    std::condition_variable done_cv_;
    std::atomic<std::function<void(std::size_t)>*> job_{nullptr};
    std::atomic<std::size_t> next_{0};  // next ticket to claim
    std::atomic<std::size_t> base_{0};  // first ticket of the current region
    std::atomic<std::size_t> end_{0};   // one past its last ticket
    std::atomic<std::size_t> pending_{0};
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_waiting_{false};
    std::atomic<bool> stop_{false};
    static constexpr int kAutoSpin = -1;     // spin_us_ in the automatic mode
    std::atomic<int> spin_us_{kAutoSpin};
    std::atomic<bool> auto_poll_{false};     // the automatic mode's last verdict
    std::chrono::steady_clock::time_point last_check_{};
    AutoPollRule auto_rule_;                 // the checks' history (the caller's, under job_mutex_)
    RegionStats stats_;                      // the caller's, under job_mutex_
    std::chrono::steady_clock::time_point last_region_end_{};
};

/// Rows per parallel range for elementwise work over rows of `row_values` values (the norms, the
/// gates): ranges of at least `min_values` values, so that a decode step's single row runs inline.
inline std::size_t row_grain(std::size_t row_values, std::size_t min_values = 32768) noexcept {
    return std::max<std::size_t>(1, min_values / std::max<std::size_t>(row_values, 1));
}

/// parallel_for on the process-wide pool.
template <class F>
void parallel_for(std::size_t n, F&& fn, std::size_t grain = 1, std::size_t parts_per_thread = 1) {
    ThreadPool::instance().parallel_for(n, std::forward<F>(fn), grain, parts_per_thread);
}

/// fn(r) for every row r < rows of elementwise work over rows of `row_values` values, the rows
/// split over the process-wide pool in ranges of row_grain(row_values) rows or more (a decode
/// step's single row runs inline). Each row is computed alike whatever the split.
template <class F>
void for_each_row(std::size_t rows, std::size_t row_values, F&& fn) {
    parallel_for(
        rows,
        [&](std::size_t r0, std::size_t r1) {
            for (std::size_t r = r0; r < r1; ++r) fn(r);
        },
        row_grain(row_values));
}

/// fn(i) for every element i < rows x row_values of elementwise work over rows of `row_values`
/// values (a row-major [rows, row_values] array), split over the pool by whole rows as
/// for_each_row splits them. Each element is computed alike whatever the split.
template <class F>
void for_each_element(std::size_t rows, std::size_t row_values, F&& fn) {
    for_each_row(rows, row_values, [&](std::size_t r) {
        for (std::size_t i = r * row_values; i < (r + 1) * row_values; ++i) fn(i);
    });
}

}  // namespace hylens
