#include "cuweave/current_stream.hpp"

#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::current_stream {

namespace {
// The thread's stack, read on every launch: through a plain thread_local pointer, which is read without the
// initialization guard and wrapper call that a thread_local with a destructor costs at each use. The stack itself is
// made at the thread's first push and freed as the thread ends, the pointer cleared first.
struct Stack {
  std::vector<std::shared_ptr<Stream>> streams;
  ~Stack();
};
thread_local Stack* current = nullptr;
// The stack's top, or null: what is() compares with, without reaching the stack and its vector (a weave asks at
// every operation, between launches that leave those lines cold).
thread_local const Stream* current_top = nullptr;
Stack::~Stack() {
  current = nullptr;
  current_top = nullptr;
}

Stack& made_stack() {
  if (current == nullptr) {
    thread_local Stack owned;
    current = &owned;
  }
  return *current;
}

const Stream* top() noexcept { return current_top; }
}  // namespace

void push(std::shared_ptr<Stream> stream) {
  Stack& stack = made_stack();
  stack.streams.push_back(std::move(stream));
  current_top = stack.streams.back().get();
}

bool pop(const Stream* stream) noexcept {
  if (current == nullptr) return false;
  auto& streams = current->streams;
  for (auto it = streams.rbegin(); it != streams.rend(); ++it) {
    if (it->get() == stream) {
      streams.erase(std::next(it).base());
      current_top = streams.empty() ? nullptr : streams.back().get();
      return true;
    }
  }
  return false;
}

std::shared_ptr<Stream> get() {
  if (top() != nullptr) return current->streams.back();
  return DefaultStream::legacy(backend().devices().current_device());
}

bool is(const Stream& stream) {
  if (const Stream* on_top = top()) return on_top == &stream;
  // DefaultStream makes one legacy default stream per device, so the device says which one get() returns.
  return stream.is_legacy_default() &&
         (!several_devices() || stream.device() == backend().devices().current_device());
}

std::size_t depth() noexcept { return current == nullptr ? 0 : current->streams.size(); }

}  // namespace cuweave::current_stream
