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

}  // namespace cuweave
