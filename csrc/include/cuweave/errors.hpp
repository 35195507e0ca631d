// Error types thrown by the core and the backends. The bindings translate each one into the
// Python exception documented in python/cuweave/errors.py.
#pragma once

#include <stdexcept>
#include <string>

namespace cuweave {

// A call into the backend (CUDA) failed. Carries the failed call, the error code and its name.
class BackendError : public std::runtime_error {
 public:
  BackendError(std::string call, int code, std::string name, const std::string& description,
               const char* file, int line);
  const std::string& call() const noexcept { return call_; }
  int code() const noexcept { return code_; }
  const std::string& name() const noexcept { return name_; }

 private:
  std::string call_;
  int code_;
  std::string name_;
};

// The device context is unusable: an earlier error (an illegal address, a kernel's trap or assert, a
// hardware fault) is sticky, so every later CUDA call in the process fails with it. Thrown for the call
// that met it (first_call and first_name empty: this is the first) and, naming that first failure, for
// every later failing call (Note [Sticky errors] in cuda_check.cpp).
class ContextLost : public BackendError {
 public:
  ContextLost(std::string call, int code, std::string name, const std::string& description, const char* file,
              int line, std::string first_call, std::string first_name);
  const std::string& first_call() const noexcept { return first_call_; }
  const std::string& first_name() const noexcept { return first_name_; }

 private:
  std::string first_call_;
  std::string first_name_;
};

// A GPU-only operation was asked for where no usable device (or driver) exists.
class DeviceUnavailable : public BackendError {
 public:
  using BackendError::BackendError;
};

// Runtime compilation of a kernel failed; what() is the compiler's log.
class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& summary, std::string log)
      : std::runtime_error(summary + "\n" + log), log_(std::move(log)) {}
  const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

// Bad value from the caller: a size, shape, priority or state the operation cannot accept (Python ValueError).
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Bad kind of object from the caller (Python TypeError).
class WrongType : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An index outside an array's extent, or too many indices (Python IndexError).
class OutOfBounds : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// Waiting for a resource ran out of time (Python TimeoutError).
class Timeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InvalidArgument(message) unless the condition holds.
#define CUWEAVE_EXPECTS(condition, message)                \
  do {                                                     \
    if (!(condition)) throw ::cuweave::InvalidArgument(message); \
  } while (0)

}  // namespace cuweave
