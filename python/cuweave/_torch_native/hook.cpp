// PyTorch's operators placed by cuweave.weave() from inside PyTorch's dispatcher (Note [PyTorch's operators placed
// from its dispatcher] in cuweave/_torch_native/__init__.py): a thread-local at::RecordFunction callback, built
// against the PyTorch installed, that calls cuweave through its placement table (placement_table.h).
#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "placement_table.h"

namespace {

const cuweave_placement_table* table = nullptr;
const c10::impl::DeviceGuardImplInterface* cuda = nullptr;
thread_local std::optional<at::CallbackHandle> attached;  // this thread's callback

// What the callback needs of an operator's schema, read once per operator.
struct OperatorFacts {
  bool touches_nothing = false;  // a view (returns aliases, writes nothing), record_stream, is_pinned
  bool returns_new = false;      // every return is new memory from the allocator
  std::uint64_t written = 0;     // bit i: argument i is written (Tensor(a!))
};

// Keyed by the operator's registered name, whose address RecordFunction hands over at each call.
thread_local std::unordered_map<const char*, OperatorFacts> facts_of;

const OperatorFacts& facts(const at::RecordFunction& fn) {
  const char* name = fn.name();
  auto found = facts_of.find(name);
  if (found != facts_of.end()) return found->second;
  OperatorFacts facts;
  const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
  if (!schema) {
    facts.touches_nothing = true;  // not an operator (a profiler range): no tensors to place by
  } else {
    const auto& arguments = schema->arguments();
    for (std::size_t i = 0; i < arguments.size() && i < 64; ++i) {
      const c10::AliasInfo* alias = arguments[i].alias_info();
      if (alias != nullptr && alias->isWrite()) facts.written |= std::uint64_t{1} << i;
    }
    bool all_alias = !schema->returns().empty();
    facts.returns_new = true;
    for (const c10::Argument& returned : schema->returns()) {
      const bool alias = returned.alias_info() != nullptr;
      all_alias = all_alias && alias;
      facts.returns_new = facts.returns_new && !alias;
    }
    const std::string& base = schema->name();
    facts.touches_nothing = (all_alias && facts.written == 0) || base == "aten::record_stream" ||
                            base == "aten::is_pinned";
  }
  return facts_of.emplace(name, facts).first->second;
}

// One operator the callback started on, until its end: started and ended in nested order on a thread.
struct Frame {
  bool own = false;     // a top-level operator while placing: the callback is off for what it calls inside
  bool placed = false;  // the current stream was set to the placed one; `previous` is to be restored
  bool returns_new = false;
  cuweave_placed where{};
  c10::Stream previous{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::CUDA, 0)};
};
thread_local std::vector<Frame> frames;

// The bytes from a tensor's lowest element to its highest (PyTorch's strides are not negative).
cuweave_range span(const at::Tensor& tensor, bool writes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(tensor.const_data_ptr());  // const: no copy-on-write copy
  if (tensor.is_contiguous()) return {begin, tensor.nbytes(), writes};
  std::int64_t last = 0;
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  for (std::size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  const auto element = static_cast<std::size_t>(tensor.element_size());
  return {begin, static_cast<std::size_t>(last) * element + element, writes};
}

// What one operator touches on the weave's device: its CUDA tensors, written where the schema says so.
struct Touched {
  std::vector<cuweave_range> ranges;
  std::vector<at::Tensor> tensors;
  bool elsewhere = false;  // a CUDA tensor on another device: the operator is not the weave's
};
thread_local Touched touched;

void add(const at::Tensor& tensor, bool writes, int device) {
  if (!tensor.defined() || !tensor.is_cuda() || tensor.numel() == 0) return;
  if (tensor.get_device() != device) {
    touched.elsewhere = true;
    return;
  }
  touched.ranges.push_back(span(tensor, writes));
  touched.tensors.push_back(tensor);
}

void add_value(const c10::IValue& value, bool writes, int device) {
  if (value.isTensor()) {
    add(value.toTensor(), writes, device);
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) add(tensor, writes, device);
  } else if (value.isList()) {  // Tensor?[] (index's indices)
    for (const c10::IValue& item : value.toListRef()) {
      if (item.isTensor()) add(item.toTensor(), writes, device);
    }
  }
}

void release_tensors(void* tensors) { delete static_cast<std::vector<at::Tensor>*>(tensors); }

// Under a capture the operator runs at each replay, on the stream replaying: the tensors live as long as the
// graph, instead of being recorded on a stream.
void keep_for_graph(const cuweave_placed& where, std::vector<at::Tensor> tensors) {
  table->keep(where.stream, new std::vector<at::Tensor>(std::move(tensors)), release_tensors);
}

c10::Stream torch_stream(const cuweave_placed& where) {
  // PyTorch names an external stream by its handle, and the default stream (handle 0) by 0.
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(where.device)),
                     static_cast<c10::StreamId>(where.stream_handle));
}

// The first failure inside the callback on this thread, for detach() to raise: PyTorch logs and drops what a
// callback throws, and cuweave's own failures wait in cuweave (raise_failed_placement).
thread_local std::string failure;

void place(const at::RecordFunction& fn, Frame& frame, int device) {
  const OperatorFacts& operator_facts = facts(fn);
  // A view calls nothing that touches memory, but an operator returning an alias may (`to`, `reshape` and
  // `contiguous` copy inside when they must): the callback stays on for what they call.
  if (operator_facts.touches_nothing) return;
  // What the operator calls inside runs where it runs: the callback is off until its end.
  frame.own = true;
  at::disableCallback(*attached);
  touched.ranges.clear();
  touched.tensors.clear();
  touched.elsewhere = false;
  const auto inputs = fn.inputs();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    add_value(inputs[i], i < 64 && ((operator_facts.written >> i) & 1), device);
  }
  // No CUDA tensor (a factory), or one on another device: it runs as it would outside the block.
  if (touched.ranges.empty() || touched.elsewhere) return;
  if (table->place(touched.ranges.data(), touched.ranges.size(), &frame.where) != 0) return;
  const c10::Stream chosen = torch_stream(frame.where);
  if (frame.where.captured) {
    keep_for_graph(frame.where, touched.tensors);
  } else {
    for (const at::Tensor& tensor : touched.tensors) {
      // Its block is not handed out again before the chosen stream has passed this use.
      cuda->recordDataPtrOnStream(tensor.storage().data_ptr(), chosen);
    }
  }
  frame.previous = cuda->exchangeStream(chosen);
  frame.placed = true;
  frame.returns_new = operator_facts.returns_new;
}

std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
  frames.emplace_back();  // every start has its end, also when the operator throws
  // PyTorch hands a thread's callbacks on to the threads that work for it (autograd's): they place nothing.
  if (!attached) return nullptr;
  const int device = table->placing_device();
  if (device < 0) return nullptr;  // no weave here, or the sanitizer's Python hooks see the operator
  try {
    place(fn, frames.back(), device);
  } catch (const std::exception& error) {
    if (failure.empty()) failure = std::string("placing PyTorch's ") + fn.name() + ": " + error.what();
  }
  return nullptr;
}

void tell_made(const at::RecordFunction& fn, const Frame& frame);

void end(const at::RecordFunction& fn, at::ObserverContext*) {
  const Frame frame = frames.back();
  frames.pop_back();
  if (frame.own) at::reenableCallback(*attached);
  if (!frame.placed) return;
  cuda->exchangeStream(frame.previous);
  if (!frame.returns_new) return;
  try {
    tell_made(fn, frame);
  } catch (const std::exception& error) {
    if (failure.empty()) failure = std::string("placing PyTorch's ") + fn.name() + "'s outputs: " + error.what();
  }
}

void tell_made(const at::RecordFunction& fn, const Frame& frame) {
  std::vector<at::Tensor> made;
  for (const c10::IValue& value : fn.outputs()) {
    if (!value.isTensor()) continue;
    const at::Tensor& tensor = value.toTensor();
    if (!tensor.defined() || !tensor.is_cuda() || tensor.numel() == 0) continue;
    const cuweave_range range = span(tensor, true);
    // New memory of the chosen stream's pool: its users elsewhere wait.
    table->allocated(range.begin, range.bytes, frame.where.stream);
    if (frame.where.captured) made.push_back(tensor);
  }
  if (!made.empty()) keep_for_graph(frame.where, std::move(made));
}

void attach(pybind11::capsule capsule) {
  TORCH_CHECK(!attached, "cuweave's PyTorch hook is already attached on this thread");
  const auto* given = static_cast<const cuweave_placement_table*>(capsule.get_pointer());
  TORCH_CHECK(std::string(capsule.name()) == CUWEAVE_PLACEMENT_TABLE_NAME && given->version ==
                  CUWEAVE_PLACEMENT_TABLE_VERSION, "cuweave's placement table is of another version than its hook");
  table = given;
  cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  attached = at::addThreadLocalCallback(
      at::RecordFunctionCallback(start, end).needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION}));
}

// Returns the first failure inside the callback since attach() ("" when none).
std::string detach() {
  TORCH_CHECK(attached, "cuweave's PyTorch hook is not attached on this thread");
  at::removeCallback(*attached);
  attached.reset();
  return std::exchange(failure, std::string());
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attach", &attach, "Places this thread's PyTorch operators in its weaves, through the table in `capsule`.");
  m.def("detach", &detach, "Undoes attach() on this thread; returns the first failure inside it since (\"\": none).");
}
