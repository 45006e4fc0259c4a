#pragma once
// The study's progress line on stderr: done / total units (records, or a study's items),
// units per second, ETA. On a terminal it is redrawn in place (at most every 0.5 s); otherwise
// a line every 10 s. A phase that makes no unit (a study's fits) is announced by note() and
// left out of the rate (exclude), so the ETA is not the fits' time spread over the records.

#include <chrono>    // std::chrono::steady_clock
#include <cstddef>   // std::size_t
#include <cstdio>    // std::fprintf, stderr
#include <string>    // std::string

#include <unistd.h>  // isatty

namespace hylens::experiments {

class Progress {
public:
    Progress(std::size_t total, std::string label, bool enabled = true, std::string unit = "records")
        : total_(total), label_(std::move(label)), unit_(std::move(unit)), enabled_(enabled), tty_(::isatty(2) != 0),
          start_(std::chrono::steady_clock::now()), last_(start_) {}

    /// One line of its own (a phase beginning: "seed 1: fitting 32 maps").
    void note(const std::string& what) const {
        if (!enabled_) return;
        std::fprintf(stderr, "%s[%s] %s\n", tty_ && done_ > 0 ? "\n" : "", label_.c_str(), what.c_str());
        std::fflush(stderr);
    }
    /// Leaves `seconds` (a phase that made no unit) out of the rate and the ETA.
    void exclude(double seconds) { excluded_ += seconds; }

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
        const double t = std::chrono::duration<double>(now - start_).count() - excluded_;
        const double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
        const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
        std::fprintf(stderr, "%s[%s] %zu/%zu %s (%.1f %%), %.2f %s/s, ETA %s%s", tty_ ? "\r" : "", label_.c_str(), done_,
                     total_, unit_.c_str(), total_ ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0,
                     rate, unit_.c_str(), clock(eta).c_str(), tty_ ? "   " : "\n");
        std::fflush(stderr);
    }
    static std::string clock(double s) {
        const auto v = static_cast<long long>(s + 0.5);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", v / 3600, (v / 60) % 60, v % 60);
        return buf;
    }

    std::size_t total_, done_ = 0;
    std::string label_, unit_;
    double excluded_ = 0.0;
    bool enabled_, tty_;
    std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace hylens::experiments
