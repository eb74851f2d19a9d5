// The one error type of seqflow: a code that frontends map to their own
// exception kinds, and a message that names the parameter and the bad value.
#pragma once

#include <stdexcept>
#include <string>

namespace seqflow {

enum class ErrorCode {
  kInvalidArgument,  // Python: ValueError
  kNotFound,         // Python: KeyError
  kTimeout,          // Python: TimeoutError
  kInternal,         // Python: RuntimeError
  // A BatchMeta names a sample that is gone, or whose global index now
  // belongs to another sample (another generation or partition).
  kStaleSample,  // Python: seqflow.StaleSampleError, a KeyError
  // The caller's identity may not do this: a CURVE key the service refused,
  // or a client key calling an operation that is the services' own.
  kPermissionDenied,  // Python: PermissionError
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

[[noreturn]] inline void throw_invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

}  // namespace seqflow
