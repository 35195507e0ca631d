#include "cuweave/current_stream.hpp"

#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::current_stream {

namespace {
std::vector<std::shared_ptr<Stream>>& stack() {
  thread_local std::vector<std::shared_ptr<Stream>> streams;
  return streams;
}
}  // namespace

void push(std::shared_ptr<Stream> stream) { stack().push_back(std::move(stream)); }

bool pop(const Stream* stream) noexcept {
  auto& streams = stack();
  for (auto it = streams.rbegin(); it != streams.rend(); ++it) {
    if (it->get() == stream) {
      streams.erase(std::next(it).base());
      return true;
    }
  }
  return false;
}

std::shared_ptr<Stream> get() {
  auto& streams = stack();
  if (!streams.empty()) return streams.back();
  return DefaultStream::legacy(backend().devices().current_device());
}

bool is(const Stream& stream) {
  const auto& streams = stack();
  if (!streams.empty()) return streams.back().get() == &stream;
  // DefaultStream makes one legacy default stream per device, so the device says which one get() returns.
  return stream.is_legacy_default() &&
         (!several_devices() || stream.device() == backend().devices().current_device());
}

std::size_t depth() noexcept { return stack().size(); }

}  // namespace cuweave::current_stream
