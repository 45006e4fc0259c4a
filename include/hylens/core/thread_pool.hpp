#pragma once
// One process-wide thread pool. Its size is set once (default: the machine's cores) before
// first use. parallel_for splits [0, n) into contiguous ranges; the calling thread takes part.
// A parallel_for called from inside a pool task runs inline (no nested parallelism), so a
// kernel may use it freely. OpenBLAS is kept at one thread (core/blas.hpp): BLAS calls and
// our pool never run two sets of threads at the same time (on 2 cores, OpenBLAS's spinning
// workers made our pool 1.7x slower, docs/toolchain.md §8).

#include <algorithm>           // std::min, std::max
#include <atomic>              // std::atomic
#include <condition_variable>  // std::condition_variable
#include <cstddef>             // std::size_t
#include <functional>          // std::function
#include <mutex>               // std::mutex
#include <thread>              // std::thread
#include <vector>              // std::vector

#include "error.hpp"

namespace hylens {

class ThreadPool {
public:
    /// The process-wide pool, created on first use.
    static ThreadPool& instance() {
        static ThreadPool pool(requested_size());
        return pool;
    }

    /// Sets the pool size; allowed only before the pool is first used (throws otherwise).
    static void set_num_threads(std::size_t n) {
        check(n >= 1, "[ThreadPool] the number of threads must be >= 1");
        check(!started(), "[ThreadPool] set_num_threads must be called before the pool is first used");
        requested_size() = n;
    }

    std::size_t size() const noexcept { return workers_.size() + 1; }

    /// Changes the number of threads of a running pool (benchmarks sweep 1, 2, ... threads in
    /// one process). Must not be called from inside a parallel_for (throws); waits for a
    /// running parallel region to end.
    void resize(std::size_t n) {
        check(n >= 1, "[ThreadPool] the number of threads must be >= 1");
        check(!in_worker(), "[ThreadPool] resize called from inside a parallel region");
        std::lock_guard<std::mutex> one_job(job_mutex_);
        if (n == size()) return;
        stop_workers();
        {
            std::lock_guard<std::mutex> lk(mutex_);
            stop_ = false;
        }
        for (std::size_t i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
    }

    /// Calls fn(begin, end) on contiguous ranges covering [0, n), at least `grain` items each.
    template <class F>
    void parallel_for(std::size_t n, F&& fn, std::size_t grain = 1) {
        if (n == 0) return;
        grain = std::max<std::size_t>(grain, 1);
        const std::size_t max_parts = (n + grain - 1) / grain;
        const std::size_t parts = std::min(max_parts, size());
        if (parts <= 1 || in_worker()) {
            fn(std::size_t{0}, n);
            return;
        }
        std::lock_guard<std::mutex> one_job(job_mutex_);  // one parallel region at a time
        const std::size_t per = (n + parts - 1) / parts;
        std::function<void(std::size_t)> part = [&](std::size_t p) {
            const std::size_t b = p * per;
            const std::size_t e = std::min(n, b + per);
            if (b < e) fn(b, e);
        };
        run(parts, part);
    }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;
    ~ThreadPool() { stop_workers(); }

private:
    void stop_workers() {
        {
            std::lock_guard<std::mutex> lk(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
    }

    explicit ThreadPool(std::size_t n) {
        started() = true;
        for (std::size_t i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
    }

    static std::size_t& requested_size() {
        static std::size_t n = std::max(1u, std::thread::hardware_concurrency());
        return n;
    }
    static bool& started() {
        static bool s = false;
        return s;
    }
    static bool& in_worker() {
        thread_local bool w = false;
        return w;
    }

    void run(std::size_t parts, std::function<void(std::size_t)>& part) {
        {
            std::lock_guard<std::mutex> lk(mutex_);
            job_ = &part;
            parts_ = parts;
            next_.store(0);
            pending_ = parts;
            ++generation_;
        }
        cv_.notify_all();
        in_worker() = true;
        work_on_current();
        in_worker() = false;
        std::unique_lock<std::mutex> lk(mutex_);
        done_cv_.wait(lk, [&] { return pending_ == 0; });
        job_ = nullptr;
    }

    void work_on_current() {
        for (;;) {
            const std::size_t p = next_.fetch_add(1);
            if (p >= parts_) break;
            (*job_.load())(p);
            std::lock_guard<std::mutex> lk(mutex_);
            if (--pending_ == 0) done_cv_.notify_all();
        }
    }

    void worker_loop() {
        in_worker() = true;
        std::size_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(mutex_);
                cv_.wait(lk, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
                if (stop_) return;
                seen = generation_;
            }
            work_on_current();
        }
    }

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::mutex job_mutex_;
    std::condition_variable cv_;
    std::condition_variable done_cv_;
    std::atomic<std::function<void(std::size_t)>*> job_{nullptr};
    std::atomic<std::size_t> parts_{0};
    std::atomic<std::size_t> next_{0};
    std::size_t pending_ = 0;
    std::size_t generation_ = 0;
    bool stop_ = false;
};

/// parallel_for on the process-wide pool.
template <class F>
void parallel_for(std::size_t n, F&& fn, std::size_t grain = 1) {
    ThreadPool::instance().parallel_for(n, std::forward<F>(fn), grain);
}

}  // namespace hylens
