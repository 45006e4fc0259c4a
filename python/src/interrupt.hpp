#pragma once
// Ctrl-C in Python while a call runs without the GIL (a forward, a generation, a whole study).
// Python runs signal handlers in its main thread only, between bytecodes, so a SIGINT was seen
// when the call returned: a study ran to its end and its result was then thrown away by the late
// KeyboardInterrupt. The library's forward polls a host check before any layer takes a token
// (core/interrupt.hpp); this one, in Python's main thread and at most every 50 ms, takes the GIL
// and runs the pending signal handlers. Where taking the GIL waited (another thread held it in a
// long C call, a sort of millions of values), the next check comes 10 times that wait later (at
// most 2 s: Ctrl-C stays responsive): a main-thread generate waited at every check, 14x slower
// beside a thread sorting. In a
// child forked from another thread than the main one, the forking thread is the child's main
// thread (as Python has it), where the check kept the parent's and never ran. When one raises (KeyboardInterrupt from the default
// SIGINT handler), its exception is kept and the C++ call unwinds with hylens::Interrupted; the
// translator raises the kept exception. A study stopped so keeps its flushed records, and
// resume=True continues it.

#include <hylens/core/interrupt.hpp>

#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__unix__) && __has_include(<pthread.h>)
#include <pthread.h>  // pthread_atfork
#define HYLENS_PYTHON_ATFORK 1
#else
#define HYLENS_PYTHON_ATFORK 0
#endif

namespace hylens::python {

namespace pyb = pybind11;

namespace detail {

inline std::atomic<unsigned long>& python_main_thread() {
    static std::atomic<unsigned long> id{0};
    return id;
}

/// The exception a signal handler raised, kept for the translator (Python's main thread only).
struct PendingSignal {
    PyObject* type = nullptr;
    PyObject* value = nullptr;
    PyObject* traceback = nullptr;
};
inline PendingSignal& pending_signal() {
    static PendingSignal p;
    return p;
}

inline void check_python_signals() {
    if (PyThread_get_thread_ident() != python_main_thread().load(std::memory_order_relaxed)) return;
    static std::atomic<std::int64_t> next{0};
    const auto ms = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    };
    const std::int64_t now = ms();
    if (now < next.load(std::memory_order_relaxed)) return;
    const pyb::gil_scoped_acquire gil;
    const std::int64_t got = ms();
    next.store(got + std::clamp<std::int64_t>(10 * (got - now), 50, 2000), std::memory_order_relaxed);
    if (PyErr_CheckSignals() == 0) return;
    PendingSignal& p = pending_signal();
    Py_XDECREF(p.type);
    Py_XDECREF(p.value);
    Py_XDECREF(p.traceback);
    PyErr_Fetch(&p.type, &p.value, &p.traceback);
    throw Interrupted();
}

}  // namespace detail

/// Installs the check (at import, in Python's main thread) and the translator that raises the
/// handler's exception where the stopped call returns.
inline void install_interrupt_check() {
    const pyb::object main = pyb::module_::import("threading").attr("main_thread")();
    detail::python_main_thread() = main.attr("ident").cast<unsigned long>();
#if HYLENS_PYTHON_ATFORK
    // The forking thread is the child's main thread (CPython's PyOS_AfterFork_Child says so too).
    static const bool follows_forks = ::pthread_atfork(nullptr, nullptr, [] {
        detail::python_main_thread().store(PyThread_get_thread_ident(), std::memory_order_relaxed);
    }) == 0;
    (void)follows_forks;
#endif
    interrupt::set_check(&detail::check_python_signals);
    pyb::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Interrupted&) {
            detail::PendingSignal& s = detail::pending_signal();
            if (s.type) {
                PyErr_Restore(s.type, s.value, s.traceback);  // steals the references
                s = {};
            } else {
                PyErr_SetNone(PyExc_KeyboardInterrupt);
            }
        }
    });
}

}  // namespace hylens::python
