#include "bindings/gil.h"

#include <cxxabi.h>

#include <chrono>
#include <thread>

namespace seqflow::bindings {

namespace {

[[noreturn]] void park_forever() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Runs `take`, a CPython call that takes the GIL. No check beforehand:
// the finalizing thread itself may take the GIL, and finalization can begin
// while a thread already waits inside `take`; CPython itself tells the
// threads apart, ending the others with a forced unwind. That unwind stops
// here and never goes on (a handler that returned would abort: glibc insists
// the unwind be rethrown).
template <class Take>
auto take_gil_or_park(Take take) noexcept {
  try {
    return take();
  } catch (abi::__forced_unwind&) {
    park_forever();
  }
}

}  // namespace

bool python_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

bool python_gone() noexcept { return !Py_IsInitialized(); }

GilReleased::GilReleased() noexcept : state_(PyEval_SaveThread()) {}

GilReleased::~GilReleased() {
  take_gil_or_park([this] { PyEval_RestoreThread(state_); });
}

std::optional<GilReleased> released_if_held() noexcept {
  if (PyGILState_Check()) return std::optional<GilReleased>(std::in_place);
  return std::nullopt;
}

GilHeld::GilHeld() noexcept : state_(take_gil_or_park([] { return PyGILState_Ensure(); })) {}

GilHeld::~GilHeld() { PyGILState_Release(state_); }

}  // namespace seqflow::bindings
