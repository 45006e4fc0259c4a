#pragma once
// NoGil: a call runs without the GIL (forwards, generation, studies), so other Python threads
// run meanwhile, as pybind11's gil_scoped_release does, with two differences:
//
// * Its destructor may throw. Re-taking the GIL while the interpreter finalizes ends the thread:
//   PyEval_RestoreThread calls pthread_exit, which unwinds the stack. Through pybind11's
//   noexcept destructor that unwinding was std::terminate, so a daemon thread still in a hylens
//   call when Python exited aborted the process (exit status 134). Here it unwinds to pybind11,
//   which lets it pass, as it does for Python's own threads.
//   A call that is already unwinding (it threw) cannot let a second unwinding pass (that is
//   std::terminate too): where the interpreter finalizes then, the thread is parked until the
//   process ends, as CPython parks its own threads.
// * The call holds the bf16-activation setting it started with (precision::HoldRoundActivations):
//   set_bf16_activations from another thread changes the next call, not the running one.

#include <hylens/core/precision.hpp>

#include <pybind11/pybind11.h>

#include <chrono>
#include <exception>
#include <thread>

namespace hylens::python {

class NoGil {
public:
    NoGil() : state_(PyEval_SaveThread()) {}
    ~NoGil() noexcept(false) {
        if (std::uncaught_exceptions() > unwinding_ && finalizing())
            for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        PyEval_RestoreThread(state_);
    }
    NoGil(const NoGil&) = delete;
    NoGil& operator=(const NoGil&) = delete;

private:
    static bool finalizing() noexcept {  // callable without the GIL, as PyEval_RestoreThread reads it
#if PY_VERSION_HEX >= 0x030D0000
        return Py_IsFinalizing() != 0;
#else
        return _Py_IsFinalizing() != 0;
#endif
    }

    int unwinding_ = std::uncaught_exceptions();
    PyThreadState* state_;
    precision::HoldRoundActivations one_arithmetic_;
};

}  // namespace hylens::python
