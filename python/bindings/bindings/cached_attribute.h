// A Python attribute (module.name) looked up on first use and kept for the life of the process.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <utility>

namespace seqflow::bindings {

nanobind::handle python_attribute(const char* module, const char* name);

// Declared `static` in a function, it is constant-initialised: no C++ static-initialisation guard. A guard
// would deadlock: the first lookup may import a module, which runs Python code that lets another thread take
// the GIL, and that thread would then wait on the guard while holding the GIL. Two threads may both look the
// attribute up; the first stored wins (the same object either way). Call with the GIL held.
class CachedAttribute {
 public:
  constexpr CachedAttribute(const char* module, const char* name) : module_(module), name_(name) {}

  nanobind::handle get() {
    PyObject* value = value_.load(std::memory_order_acquire);
    if (value != nullptr) return value;
    PyObject* found = python_attribute(module_, name_).ptr();  // a reference kept for the process
    if (!value_.compare_exchange_strong(value, found, std::memory_order_acq_rel)) {
      Py_DECREF(found);
      return value;
    }
    return found;
  }
  operator nanobind::handle() { return get(); }
  PyObject* ptr() { return get().ptr(); }
  template <typename... Args>
  nanobind::object operator()(Args&&... args) {
    return get()(std::forward<Args>(args)...);
  }

 private:
  const char* module_;
  const char* name_;
  std::atomic<PyObject*> value_{nullptr};
};

}  // namespace seqflow::bindings
