// The current stream: a thread-local stack that `with stream:` pushes and pops, shared by C++ and Python.
#pragma once

#include <memory>

namespace cuweave {

class Stream;

namespace current_stream {

void push(std::shared_ptr<Stream> stream);
// Removes the innermost entry for `stream` (normally the top). Returns false if it was not on the stack.
bool pop(const Stream* stream) noexcept;
// The innermost stream entered on this thread, else the legacy default stream of the current device.
std::shared_ptr<Stream> get();
// Whether `stream` is what get() returns, without counting a reference or, in a process that sees one device,
// asking the backend for the current device: a weave asks at each operation.
bool is(const Stream& stream);
std::size_t depth() noexcept;

}  // namespace current_stream
}  // namespace cuweave
