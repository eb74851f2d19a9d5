// Releasing and taking the GIL on threads that may still be inside a seqflow
// call when the interpreter exits (daemon threads, C++ threads calling back
// into Python).
//
// Once Py_FinalizeEx has begun, CPython 3.11 to 3.13 ends any other thread
// that tries to take the GIL with pthread_exit, a forced unwind. Inside a
// binding that unwind meets noexcept destructors and nanobind's catch (...)
// and the process dies in std::terminate ("terminate called without an
// active exception"). These guards instead park such a thread for good,
// without the GIL, and the process's exit ends it (CPython 3.14 does the same
// with its own threads). Use them instead of nanobind's gil_scoped_release
// and gil_scoped_acquire.
#pragma once

#include <Python.h>

#include <optional>

namespace seqflow::bindings {

// True once the interpreter is finalizing, or before or after it runs. Code
// that may run that late on a thread of its own (releasing a Python object
// from a ZeroMQ thread) checks it and leaks instead of taking the GIL: once
// finalization is over, even trying to take the GIL is not safe.
bool python_finalizing() noexcept;
// True once the interpreter has finalized (or before it ran): no Python
// object may be touched then, not even released.
bool python_gone() noexcept;

// Releases the GIL for a call into C++; takes it back, or parks the thread
// when the interpreter finalized meanwhile.
class GilReleased {
 public:
  GilReleased() noexcept;
  ~GilReleased();
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

// A GilReleased when this thread holds the GIL, else nothing (a last
// reference dropped on a thread of the engine's).
std::optional<GilReleased> released_if_held() noexcept;

// Takes the GIL on a thread that does not hold it (a C++ thread calling a
// Python sampler, a ZeroMQ thread dropping a borrowed array), or parks the
// thread when the interpreter finalizes (unless it is the finalizing thread).
class GilHeld {
 public:
  GilHeld() noexcept;
  ~GilHeld();
  GilHeld(const GilHeld&) = delete;
  GilHeld& operator=(const GilHeld&) = delete;

 private:
  PyGILState_STATE state_;
};

}  // namespace seqflow::bindings
