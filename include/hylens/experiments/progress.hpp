#pragma once
// The study's progress line on stderr: done / total records, records per second, ETA. On a
// terminal it is redrawn in place (at most every 0.5 s); otherwise a line every 10 s.

#include <chrono>    // std::chrono::steady_clock
#include <cstddef>   // std::size_t
#include <cstdio>    // std::fprintf, stderr
#include <string>    // std::string

#include <unistd.h>  // isatty

namespace hylens::experiments {

class Progress {
public:
    Progress(std::size_t total, std::string label, bool enabled = true)
        : total_(total), label_(std::move(label)), enabled_(enabled), tty_(::isatty(2) != 0),
          start_(std::chrono::steady_clock::now()), last_(start_) {}

    void add(std::size_t n) {
        done_ += n;
        const auto now = std::chrono::steady_clock::now();
        const double since = std::chrono::duration<double>(now - last_).count();
        if (enabled_ && (since >= (tty_ ? 0.5 : 10.0) || done_ == total_)) {
            last_ = now;
            print(now);
        }
    }
    void finish() {
        if (enabled_ && tty_) std::fprintf(stderr, "\n");
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    void print(std::chrono::steady_clock::time_point now) const {
        const double t = std::chrono::duration<double>(now - start_).count();
        const double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
        const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
        std::fprintf(stderr, "%s[%s] %zu/%zu records (%.1f %%), %.2f records/s, ETA %s%s", tty_ ? "\r" : "",
                     label_.c_str(), done_, total_, total_ ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0,
                     rate, clock(eta).c_str(), tty_ ? "   " : "\n");
        std::fflush(stderr);
    }
    static std::string clock(double s) {
        const auto v = static_cast<long long>(s + 0.5);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", v / 3600, (v / 60) % 60, v % 60);
        return buf;
    }

    std::size_t total_, done_ = 0;
    std::string label_;
    bool enabled_, tty_;
    std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace hylens::experiments
