#include "cuweave/backend.hpp"

#include <cstring>
#include <string>

#include "cuweave/errors.hpp"

namespace cuweave {

namespace {
// Note [Capture errors name the fix]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Two capture errors come from the order of a program's records and waits, and CUDA names the rule but not the
// remedy ("dependency created on uncaptured work in another stream"). The simulator describes what it saw; on
// both backends, whichever call meets them (a stream wait, the end of a capture or of a body), the error's text
// then says what to do, so that a fork/join written with the fork's event recorded before the capture began, or
// a forked stream never joined back, says how to write it instead.
const char* what_to_do(const std::string& name) {
  if (name == "cudaErrorStreamCaptureIsolation") {
    return "captured work can depend only on work of the same capture. Record the event after the capture "
           "began, on the capturing stream or on a stream that joined it (a fork is `other.wait(capturing.record())` "
           "inside the `with cw.capture(capturing):` block), or wait for the event before beginning the capture.";
  }
  if (name == "cudaErrorStreamCaptureUnjoined") {
    return "a stream that joined the capture (by waiting for an event recorded in it) has work the capturing "
           "stream never waited for. Join it back before the capture ends: `capturing.wait(other.record())`.";
  }
  return nullptr;
}

std::string error_text(const std::string& call, int code, const std::string& name, const std::string& description,
                       const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  std::string text = call + " failed: " + name + " (" + std::to_string(code) + "): " + description + " [" +
                     (base ? base + 1 : file) + ":" + std::to_string(line) + "]";
  if (const char* fix = what_to_do(name)) text += std::string("\n  What to do: ") + fix;
  return text;
}
}  // namespace

BackendError::BackendError(std::string call, int code, std::string name, const std::string& description,
                           const char* file, int line)
    : std::runtime_error(error_text(call, code, name, description, file, line)),
      call_(std::move(call)),
      code_(code),
      name_(std::move(name)) {}

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
