#include "cuweave/backend.hpp"

#include <cstring>
#include <string>

#include "cuweave/errors.hpp"

namespace cuweave {

namespace {
std::string error_text(const std::string& call, int code, const std::string& name, const std::string& description,
                       const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  return call + " failed: " + name + " (" + std::to_string(code) + "): " + description + " [" +
         (base ? base + 1 : file) + ":" + std::to_string(line) + "]";
}
}  // namespace

BackendError::BackendError(std::string call, int code, std::string name, const std::string& description,
                           const char* file, int line)
    : std::runtime_error(error_text(call, code, name, description, file, line)),
      call_(std::move(call)),
      code_(code),
      name_(std::move(name)) {}

BackendError::BackendError(Text, const std::string& text, std::string call, int code, std::string name)
    : std::runtime_error(text), call_(std::move(call)), code_(code), name_(std::move(name)) {}

BackendError BackendError::with_fix(const std::string& what_to_do) const {
  return BackendError(Text{}, std::string(what()) + "\n  What to do: " + what_to_do, call_, code_, name_);
}

namespace {
std::string context_lost_text(const std::string& call, const std::string& name, const std::string& first_call,
                              const std::string& first_name) {
  const std::string restart =
      "The CUDA context of this process is unusable: every later CUDA call fails. Save what you need and restart "
      "the process (in Jupyter: restart the kernel) to use the GPU again.";
  if (first_call.empty()) return " " + restart;  // this call met the error
  return " This call could not run because " + first_call + " failed earlier with " + first_name +
         ", an error that cannot be recovered from. " + restart;
}
}  // namespace

ContextLost::ContextLost(std::string call, int code, std::string name, const std::string& description,
                         const char* file, int line, std::string first_call, std::string first_name)
    : BackendError(call, code, name, description + "." + context_lost_text(call, name, first_call, first_name), file,
                   line),
      first_call_(first_call.empty() ? this->call() : std::move(first_call)),
      first_name_(first_name.empty() ? this->name() : std::move(first_name)) {}

}  // namespace cuweave
