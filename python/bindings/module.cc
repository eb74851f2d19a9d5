// The _seqflow extension module: one submodule per C++ layer.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cerrno>

#include "bindings/arguments.h"
#include "bindings/submodules.h"
#include "seqflow/error.h"
#include "transport/zmq_message_memory.h"

namespace nb = nanobind;

NB_MODULE(_seqflow, m) {
  // Imported here, while the module loads on one thread: the bindings' function-local statics that look numpy's
  // types up then find it in sys.modules and run no Python code under their initialisation guard.
  nb::module_::import_("numpy");
  // Before any ZeroMQ thread exists: libzmq's large messages then come from the block cache.
  seqflow::transport::keep_large_zmq_messages_in_block_cache();
  // A KeyError, so that callers that caught KeyError for a cleared sample
  // still catch it; seqflow re-exports it as seqflow.StaleSampleError.
  static PyObject* stale_sample_error =
      PyErr_NewExceptionWithDoc("seqflow.StaleSampleError",
                                "A BatchMeta names a sample that is gone, or whose global index now holds another "
                                "sample (another generation or partition).",
                                PyExc_KeyError, nullptr);
  if (stale_sample_error == nullptr) throw nb::python_error();
  m.attr("StaleSampleError") = nb::handle(stale_sample_error);
  // A wrong argument's type: a TypeError that is also a ValueError (seqflow raised ValueError for these before,
  // and callers catch that); seqflow._checks raises it too.
  nb::module_ checks = m.def_submodule("checks", "The argument checks' exception (seqflow._checks)");
  nb::object bases = nb::make_tuple(nb::handle(PyExc_TypeError), nb::handle(PyExc_ValueError));
  static PyObject* argument_type_error = PyErr_NewExceptionWithDoc(
      "seqflow._checks.ArgumentTypeError", "An argument of the wrong type.", bases.ptr(), nullptr);
  if (argument_type_error == nullptr) throw nb::python_error();
  checks.attr("ArgumentTypeError") = nb::handle(argument_type_error);
  nb::register_exception_translator([](const std::exception_ptr& error, void*) {
    try {
      std::rethrow_exception(error);
    } catch (const seqflow::bindings::ArgumentTypeError& e) {
      PyErr_SetString(argument_type_error, e.what());
    } catch (const seqflow::bindings::MissingFile& e) {
      nb::object raised = nb::handle(PyExc_FileNotFoundError)(ENOENT, e.what(), e.path());
      PyErr_SetObject(PyExc_FileNotFoundError, raised.ptr());
    } catch (const seqflow::Error& e) {
      switch (e.code()) {
        case seqflow::ErrorCode::kInvalidArgument:
          PyErr_SetString(PyExc_ValueError, e.what());
          break;
        case seqflow::ErrorCode::kNotFound:
          PyErr_SetString(PyExc_KeyError, e.what());
          break;
        case seqflow::ErrorCode::kTimeout:
          PyErr_SetString(PyExc_TimeoutError, e.what());
          break;
        case seqflow::ErrorCode::kInternal:
          PyErr_SetString(PyExc_RuntimeError, e.what());
          break;
        case seqflow::ErrorCode::kStaleSample:
          PyErr_SetString(stale_sample_error, e.what());
          break;
        case seqflow::ErrorCode::kPermissionDenied:
          PyErr_SetString(PyExc_PermissionError, e.what());
          break;
      }
    }
  });
  seqflow::bindings::bind_batch_meta(m);
  seqflow::bindings::bind_balance(m.def_submodule("balance", "The balancing engine"));
  seqflow::bindings::bind_pack(m.def_submodule("pack", "Pack plans and micro-batch plans"));
  seqflow::bindings::bind_client(
      m.def_submodule("client", "The client (embedded or remote), samplers and data conversion"));
  seqflow::bindings::bind_dtype_names(
      m.def_submodule("convert", "The element types a put may hold (seqflow._columns, seqflow._convert)"));
  seqflow::bindings::bind_limits(m.def_submodule("limits", "The limits the engine enforces (seqflow/limits.h)"));
  seqflow::bindings::bind_services(
      m.def_submodule("server", "Remote mode's services in this process, CURVE key files"));
}
