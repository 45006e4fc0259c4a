#pragma once
// A host's way to stop a long call between forward passes. A Python session has no other: the
// bindings run forwards, generation and whole studies without the GIL, so a Ctrl-C (a notebook's
// "interrupt kernel") was only seen when the call returned, and a study ran to its end.
//
// The host sets a check (interrupt::set_check); CausalLM::forward calls it (interrupt::poll)
// before any layer takes a token, so a stop never leaves a cache part-updated. The check throws
// Interrupted to stop; a study stopped so keeps the records it flushed and resumes as a killed
// run does. Interrupted is not a hylens::Error: code that handles bad input does not catch it.

#include <atomic>     // std::atomic
#include <exception>  // std::exception

namespace hylens {

/// Thrown by a host's interrupt check to stop the call in progress.
class Interrupted : public std::exception {
public:
    const char* what() const noexcept override { return "interrupted"; }
};

namespace interrupt {

/// A check that throws Interrupted when the host asks for a stop (nullptr: none).
using Check = void (*)();

inline std::atomic<Check>& check_slot() {
    static std::atomic<Check> c{nullptr};
    return c;
}

/// Sets (or, with nullptr, clears) the host's check.
inline void set_check(Check c) { check_slot().store(c); }

/// Calls the host's check, if any.
inline void poll() {
    if (const Check c = check_slot().load(std::memory_order_relaxed)) c();
}

}  // namespace interrupt

}  // namespace hylens
