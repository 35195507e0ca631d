// PyTorch's operators placed by cuweave.weave() and checked by cuweave's stream-race sanitizer from inside PyTorch's
// dispatcher (Note [PyTorch's operators placed from its dispatcher] and Note [PyTorch's operators checked from its
// dispatcher] in cuweave/_torch_native/__init__.py): a thread-local at::RecordFunction callback, built against the
// PyTorch installed, that calls cuweave through its hook table (hook_table.h).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hook_table.h"

namespace {

const cuweave_hook_table* table = nullptr;
const c10::impl::DeviceGuardImplInterface* cuda = nullptr;
thread_local std::optional<at::CallbackHandle> attached;  // this thread's callback, where it attached one
// The Python thread that attached last: a race found on a thread PyTorch handed the callback on to (autograd's, for
// the backward() call that waits for it) is raised there.
std::atomic<unsigned long> attaching_thread{0};
// While above 0 the callback does nothing on any thread: the Python dispatch mode sees PyTorch's operators instead
// (under a capture, PyTorch's or cuweave's).
std::atomic<int> paused{0};
// Whether a stream has touched pinned host memory: until then, operators on CPU tensors alone need no check.
std::atomic<bool> host_bytes_on_streams{false};

// What the callback needs of an operator's schema, read once per operator.
struct OperatorFacts {
  std::string name;              // "torch add_.Tensor", as reports name it
  bool touches_nothing = false;  // a view (returns aliases, writes nothing), record_stream, is_pinned
  bool records_stream = false;   // record_stream: the allocator's note, told to the sanitizer
  bool returns_new = false;      // every return is new memory from the allocator
  bool returns = false;          // it returns something (which RecordFunction's outputs hold once it has run)
  bool allocates_only = false;   // empty and its kin: new memory, nothing written
  bool calls_inside = false;     // seen calling other operators: the callback is turned off while it runs
  std::uint64_t written = 0;     // bit i: argument i is written (Tensor(a!))
  int non_blocking_at = -1;      // _to_copy: its non_blocking argument (Note [Blocking copies])
};

// Keyed by the operator's registered name, whose address RecordFunction hands over at each call.
thread_local std::unordered_map<const char*, OperatorFacts> facts_of;

OperatorFacts& facts(const at::RecordFunction& fn) {
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
    facts.returns = !schema->returns().empty();
    bool all_alias = facts.returns;
    facts.returns_new = true;
    for (const c10::Argument& returned : schema->returns()) {
      const bool alias = returned.alias_info() != nullptr;
      all_alias = all_alias && alias;
      facts.returns_new = facts.returns_new && !alias;
    }
    const std::string& full = schema->name();  // "aten::add_"
    const std::size_t namespace_end = full.find("::");
    const std::string base = namespace_end == std::string::npos ? full : full.substr(namespace_end + 2);
    const std::string& overload = schema->overload_name();
    facts.name = "torch " + base + "." + (overload.empty() ? "default" : overload);
    facts.records_stream = full == "aten::record_stream";
    // An in-place view (detach_, squeeze_, as_strided_, set_, resize_) changes what the tensor is, not its bytes;
    // so do requires_grad_ and retain_grad.
    const std::optional<c10::OperatorHandle> handle =
        c10::Dispatcher::singleton().findOp(c10::OperatorName(full, overload));
    const bool changes_no_bytes = (handle && handle->hasTag(at::Tag::inplace_view)) ||
                                  full == "aten::requires_grad_" || full == "aten::retain_grad";
    facts.touches_nothing = (all_alias && facts.written == 0) || changes_no_bytes || facts.records_stream ||
                            full == "aten::is_pinned";
    if (full == "aten::_to_copy") facts.non_blocking_at = schema->argumentIndexWithName("non_blocking").value_or(-1);
    // What the hook sees of an allocation is the operator called (new_empty), not the empty it becomes inside.
    facts.allocates_only = full == "aten::empty" || full == "aten::empty_strided" || full == "aten::empty_like" ||
                           full == "aten::empty_permuted" || full == "aten::new_empty" ||
                           full == "aten::new_empty_strided";
  }
  return facts_of.emplace(name, std::move(facts)).first->second;
}

// One operator the callback started on, until its end: started and ended in nested order on a thread.
struct Frame {
  bool own = false;       // an operator the callback handles: what it calls inside is not (see handled_depth)
  bool turned_off = false;  // the callback is turned off until its end
  bool placed = false;  // the current stream was set to the placed one; `previous` is to be restored
  bool checked = false;  // the sanitizer was told the operator: its new outputs are told at its end
  bool from_device = false;  // it touches CUDA tensors (a new CPU tensor is a copy's)
  bool blocking_copy = false;  // a copy between the host and a device that synchronizes inside (Note [Blocking copies])
  c10::ScalarType copied_type = c10::ScalarType::Undefined;  // the blocking copy's source's
  const OperatorFacts* facts = nullptr;
  cuweave_placed where{};
  cuweave_stream stream{};  // where the sanitizer takes it to run
  unsigned long raise_in = 0;
  c10::Stream previous{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::CUDA, 0)};
};
thread_local std::vector<Frame> frames;
// A table call on this thread found a race, kept in cuweave until the outermost operator ends (raise_found): raised
// sooner, it would meet the Python code PyTorch runs inside the operator (its GPU trace callbacks), which logs and
// drops it.
thread_local bool race_kept = false;

// CUDA tensors Python would let go of while an error is set, kept until the next operator starts or the hook
// detaches: a block freed then runs PyTorch's GPU trace callbacks, which fail on the error already set (a SystemError
// that replaces it). They are the outputs of the operator whose end raised a race (Python raises it as the operator
// returns, its outputs on the caller's stack), and the arguments of a handled operator that threw (a temporary such as
// `x.add_(torch.ones(3, device="cuda"))`).
thread_local std::vector<at::Tensor> kept_through_error;

// Notes a table call's answer: 1 is a race kept for raise_found.
void note_race(int answer) {
  if (answer == 1) race_kept = true;
}
// Note [Operators calling operators]: what a handled operator calls inside runs where it runs, and is neither placed
// nor checked again. Turning the callback off until the operator ends saves a composite operator's inner calls their
// callbacks (each boxes its arguments), but costs a leaf operator (most on CUDA) more than it saves: so the callback
// stays on, skips what is called inside a handled operator, and learns from that which operators call others, for
// which it is turned off from then on. (On a thread PyTorch handed the callback on to, it cannot be turned off.)
thread_local int handled_depth = 0;             // handled operators not ended whose callback stayed on
thread_local OperatorFacts* handling = nullptr;  // the outermost of them

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

// PyTorch's stream as the sanitizer names it: by handle, lasting unless it is a torch.cuda.ExternalStream (whose id
// is its handle, an even number; PyTorch's own streams have odd ids, its default stream 0).
cuweave_stream stream_ref(const c10::Stream& stream) {
  cuweave_stream ref{};
  ref.device = stream.device_index();
  ref.handle = stream.id() == 0 ? 0 : reinterpret_cast<std::uintptr_t>(cuda->getStreamNativeHandle(stream));
  ref.lasting = !(stream.id() != 0 && (stream.id() & 1) == 0);
  return ref;
}

cuweave_stream current_stream_ref(c10::DeviceIndex device) {
  return stream_ref(cuda->getStream(c10::Device(c10::DeviceType::CUDA, device)));
}

// What one operator touches: its CUDA tensors, written where the schema says so, and (while checking) its CPU
// tensors that are not scalars, which may be pinned memory that copies touch.
struct Touched {
  std::vector<cuweave_range> ranges;
  // The CUDA tensors and the CPU tensors, as pointers to the operator's arguments, which live until its end (not used
  // after it). A reference held past the operator would keep a tensor the program let go of until the next operator:
  // its block freed there, named at that line, and handed out again later than the program says. (On PyTorch 2.15
  // such a hold made the next operator on the same tensors cheaper, about 0.3 us on the CPU: their reference counts
  // then need no trip for the GIL.) Held only past an operator that throws (kept_through_error).
  std::vector<c10::TensorImpl*> tensors;
  std::vector<std::pair<const at::Tensor*, bool>> on_host;  // (tensor, written)
  c10::DeviceIndex device = -1;  // the first CUDA tensor's
  bool mixed = false;            // CUDA tensors on more than one device
};
thread_local Touched touched;

void add(const at::Tensor& tensor, bool writes, bool host_too) {
  if (!tensor.defined() || tensor.numel() == 0) return;
  if (!tensor.is_cuda()) {
    if (host_too && tensor.is_cpu() && tensor.dim() > 0) touched.on_host.emplace_back(&tensor, writes);
    return;
  }
  if (touched.device < 0) {
    touched.device = tensor.get_device();
  } else if (tensor.get_device() != touched.device) {
    touched.mixed = true;
  }
  touched.ranges.push_back(span(tensor, writes));
  touched.tensors.push_back(tensor.unsafeGetTensorImpl());
}

void add_value(const c10::IValue& value, bool writes, bool host_too) {
  if (value.isTensor()) {
    add(value.toTensor(), writes, host_too);
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) add(tensor, writes, host_too);
  } else if (value.isList()) {  // Tensor?[] (index's indices)
    for (const c10::IValue& item : value.toListRef()) {
      if (item.isTensor()) add(item.toTensor(), writes, host_too);
    }
  }
}

c10::Stream torch_stream(const cuweave_placed& where) {
  // PyTorch names an external stream by its handle, and the default stream (handle 0) by 0.
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(where.device)),
                     static_cast<c10::StreamId>(where.stream_handle));
}

// The first failure inside the callback on this thread, for detach() to raise: PyTorch logs and drops what a
// callback throws, and cuweave's own failures wait in cuweave (raise_hook_failure).
thread_local std::string failure;

// The pinned ones of `on_host`, as ranges.
std::vector<cuweave_range> pinned(const std::vector<std::pair<const at::Tensor*, bool>>& on_host) {
  std::vector<cuweave_range> ranges;
  for (const auto& [tensor, writes] : on_host) {
    // Asked of PyTorch's accelerator hooks directly: Tensor::is_pinned() is an operator, which the callback would see.
    if (at::globalContext().isPinnedPtr(tensor->storage().data())) ranges.push_back(span(*tensor, writes));
  }
  return ranges;
}

// record_stream(tensor, stream): the caching allocator reuses the tensor's block only after `stream`'s work up to the
// tensor's free.
void tell_stream_recorded(const at::RecordFunction& fn) {
  const auto inputs = fn.inputs();
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isStream()) return;
  const at::Tensor& tensor = inputs[0].toTensor();
  if (!tensor.defined() || !tensor.is_cuda()) return;
  const cuweave_stream ref = stream_ref(inputs[1].toStream());
  table->stream_recorded(reinterpret_cast<std::uintptr_t>(tensor.storage().data_ptr().get()), &ref);
}

void handle(const at::RecordFunction& fn, Frame& frame, bool here, int placing_device, bool checks) {
  OperatorFacts& operator_facts = facts(fn);
  frame.facts = &operator_facts;
  // A view calls nothing that touches memory, but an operator returning an alias may (`to`, `reshape` and
  // `contiguous` copy inside when they must): the callback stays on for what they call.
  if (operator_facts.touches_nothing) {
    if (checks && operator_facts.records_stream) tell_stream_recorded(fn);
    return;
  }
  frame.own = true;  // Note [Operators calling operators]
  if (here && operator_facts.calls_inside) {
    at::disableCallback(*attached);
    frame.turned_off = true;
  } else if (handled_depth++ == 0) {
    handling = &operator_facts;
  }
  touched.ranges.clear();
  touched.tensors.clear();
  touched.on_host.clear();
  touched.device = -1;
  touched.mixed = false;
  const auto inputs = fn.inputs();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    add_value(inputs[i], i < 64 && ((operator_facts.written >> i) & 1), checks);
  }
  frame.from_device = !touched.ranges.empty();
  frame.raise_in = here ? 0 : attaching_thread.load(std::memory_order_relaxed);
  // Placed where its CUDA tensors are all on the weave's device; one with none (a factory), or on another device,
  // runs as it would outside the block.
  if (placing_device >= 0 && frame.from_device && !touched.mixed && touched.device == placing_device &&
      table->place(touched.ranges.data(), touched.ranges.size(), &frame.where) == 0) {
    const c10::Stream chosen = torch_stream(frame.where);
    frame.stream = cuweave_stream{frame.where.stream, frame.where.stream_handle, frame.where.device, 1};
    for (const c10::TensorImpl* tensor : touched.tensors) {
      // Its block is not handed out again before the chosen stream has passed this use.
      const c10::DataPtr& block = tensor->storage().data_ptr();
      cuda->recordDataPtrOnStream(block, chosen);
      if (checks) table->stream_recorded(reinterpret_cast<std::uintptr_t>(block.get()), &frame.stream);
    }
    frame.previous = cuda->exchangeStream(chosen);
    frame.placed = true;
  } else if (checks && frame.from_device) {
    frame.stream = current_stream_ref(touched.device);
  }
  if (!checks) return;
  frame.checked = true;
  if (operator_facts.non_blocking_at >= 0 && static_cast<std::size_t>(operator_facts.non_blocking_at) < inputs.size() &&
      inputs[0].isTensor()) {
    const c10::IValue& non_blocking = inputs[operator_facts.non_blocking_at];
    frame.blocking_copy = !(non_blocking.isBool() && non_blocking.toBool());
    frame.copied_type = inputs[0].toTensor().scalar_type();
  }
  // Pinned CPU tensors (Note [Host operations of another library] in cuweave's sanitizer.cpp): beside CUDA tensors,
  // a copy whose stream touches their bytes; alone, the host's own reads and writes, checked once a stream has
  // touched pinned memory. Pageable memory is left out: a copy to or from it is done when the call returns.
  if (!touched.on_host.empty() && (frame.from_device || host_bytes_on_streams.load(std::memory_order_relaxed))) {
    const std::vector<cuweave_range> host = pinned(touched.on_host);
    if (!host.empty() && frame.from_device) {
      touched.ranges.insert(touched.ranges.end(), host.begin(), host.end());
      host_bytes_on_streams.store(true, std::memory_order_relaxed);
    } else if (!host.empty()) {
      note_race(table->check_host(operator_facts.name.c_str(), host.data(), host.size(), frame.raise_in));
    }
  }
  if (frame.from_device) {
    note_race(table->check(operator_facts.name.c_str(), touched.ranges.data(), touched.ranges.size(),
                           &frame.stream, frame.raise_in));
  }
}

std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
  frames.emplace_back();  // every start has its end, also when the operator throws
  // A race raised as the last operator ended that Python has not met yet (it looks after a function call, not
  // after `a + b` or at a del) is held through this one, whose GPU trace callbacks would meet it and drop it.
  if (frames.size() == 1) {
    note_race(table->hold_raised());
    kept_through_error.clear();
  }
  if (handled_depth > 0) {  // called inside a handled operator (Note [Operators calling operators])
    handling->calls_inside = true;
    return nullptr;
  }
  if (paused.load(std::memory_order_relaxed) > 0) return nullptr;
  // PyTorch hands a thread's callbacks on to the threads that work for it (autograd's): there they check what the
  // sanitizer checks, and place nothing.
  const bool here = attached.has_value();
  int device = -1;
  const int jobs = table->jobs(&device);
  const bool places = here && (jobs & CUWEAVE_HOOK_PLACES) != 0;
  const bool checks = (jobs & CUWEAVE_HOOK_CHECKS) != 0;
  if (!places && !checks) return nullptr;  // no weave here, nor the sanitizer
  try {
    handle(fn, frames.back(), here, places ? device : -1, checks);
  } catch (const std::exception& error) {
    if (failure.empty()) failure = std::string("handling PyTorch's ") + fn.name() + ": " + error.what();
  }
  return nullptr;
}

void tell_made(const at::RecordFunction& fn, const Frame& frame);
void tell_copy_synchronized(const at::RecordFunction& fn, const Frame& frame);
void add_made(const c10::IValue& value, std::vector<at::Tensor>& on_device,
              std::vector<std::pair<const at::Tensor*, bool>>* on_host);

void end(const at::RecordFunction& fn, at::ObserverContext*) {
  const Frame frame = frames.back();
  frames.pop_back();
  if (frame.turned_off) {
    at::reenableCallback(*attached);
  } else if (frame.own) {
    --handled_depth;
  }
  if (frame.placed) cuda->exchangeStream(frame.previous);
  // It threw (as its end runs while the exception unwinds it, or, where PyTorch catches it for that, without its
  // outputs): its arguments are alive until its caller's catch.
  if (frame.own && (std::uncaught_exceptions() > 0 || (frame.facts->returns && fn.outputs().empty()))) {
    for (c10::TensorImpl* tensor : touched.tensors) {
      using Owning = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
      kept_through_error.emplace_back(Owning::reclaim_copy(tensor));
    }
    touched.tensors.clear();
  }
  if (frame.facts != nullptr && frame.facts->returns_new && (frame.placed || frame.checked)) {
    try {
      tell_made(fn, frame);
      if (frame.blocking_copy) tell_copy_synchronized(fn, frame);
    } catch (const std::exception& error) {
      if (failure.empty()) failure = std::string("handling PyTorch's ") + fn.name() + "'s outputs: " + error.what();
    }
  }
  if (race_kept && frames.empty()) {  // the outermost operator's end: what PyTorch runs inside it has run
    race_kept = false;
    // (On a thread PyTorch handed the callback on to, the race goes to the waiting thread, whose stack holds none.)
    if (attached) {
      for (const c10::IValue& value : fn.outputs()) add_made(value, kept_through_error, nullptr);  // its CUDA tensors
    }
    table->raise_found();
  }
}

void add_made_tensor(const at::Tensor& tensor, std::vector<at::Tensor>& on_device,
                     std::vector<std::pair<const at::Tensor*, bool>>* on_host) {
  if (!tensor.defined() || tensor.numel() == 0) return;
  if (tensor.is_cuda()) {
    on_device.push_back(tensor);
  } else if (on_host != nullptr && tensor.is_cpu() && tensor.dim() > 0) {
    on_host->emplace_back(&tensor, true);  // the output lives as long as RecordFunction's outputs
  }
}

// An output's tensors: CUDA ones to `on_device`, CPU ones that are not scalars to `on_host` where it is given.
void add_made(const c10::IValue& value, std::vector<at::Tensor>& on_device,
              std::vector<std::pair<const at::Tensor*, bool>>* on_host) {
  if (value.isTensor()) {
    add_made_tensor(value.toTensor(), on_device, on_host);
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) add_made_tensor(tensor, on_device, on_host);
  }
}

// The operator's new outputs: new memory of the chosen stream's pool, which its users elsewhere wait for; and, to
// the sanitizer, blocks its allocators handed out (checked against their earlier users) that the operator writes.
void tell_made(const at::RecordFunction& fn, const Frame& frame) {
  std::vector<at::Tensor> on_device;
  std::vector<std::pair<const at::Tensor*, bool>> on_host;
  // New CPU tensors matter once they may be pinned memory that a stream touches (as for the inputs).
  const bool host_too =
      frame.checked && (frame.from_device || host_bytes_on_streams.load(std::memory_order_relaxed));
  for (const c10::IValue& value : fn.outputs()) add_made(value, on_device, host_too ? &on_host : nullptr);
  std::vector<cuweave_range> written;
  for (const at::Tensor& tensor : on_device) written.push_back(span(tensor, true));
  if (frame.placed) {
    for (const cuweave_range& range : written) table->allocated(range.begin, range.bytes, frame.where.stream);
  }
  if (!frame.checked) return;
  const char* name = frame.facts->name.c_str();
  if (!on_host.empty()) {
    // A pinned block PyTorch's host allocator hands out waited for the copies that used it before: its history
    // goes. Made by a copy from the device (`to("cpu", non_blocking=True)`), the copy's stream writes it.
    const std::vector<cuweave_range> host = pinned(on_host);
    for (const cuweave_range& range : host) table->host_handed_out(range.begin, range.bytes);
    if (!host.empty() && frame.from_device) {
      host_bytes_on_streams.store(true, std::memory_order_relaxed);
      note_race(table->check(name, host.data(), host.size(), &frame.stream, frame.raise_in));
    }
  }
  if (written.empty()) return;
  // A block handed out again is checked against its earlier users.
  const cuweave_stream allocating = frame.placed ? frame.stream : current_stream_ref(on_device.front().get_device());
  for (const cuweave_range& range : written) {
    note_race(table->handed_out(range.begin, range.bytes, &allocating, frame.raise_in));
  }
  if (!frame.facts->allocates_only) {
    note_race(table->check(name, written.data(), written.size(), &allocating, frame.raise_in));
  }
}

// Note [Blocking copies]: a copy between the host and a device without non_blocking (`x.cuda()`, `x.cpu()`,
// torch.tensor(data, device="cuda")) synchronizes its stream inside, after its copy, and PyTorch's GPU trace reports
// that synchronize then; but its new output is told as the call ends, after it, and would be taken as still being
// written. So the synchronize is told again after the output: a tensor copied from the host is ready for any stream,
// one copied to pinned host memory for the host. Not where PyTorch stages the copy (its copy_kernel_cuda): into a CUDA
// tensor that is not contiguous, in another dtype, it copies to a contiguous one and that on the stream after the
// synchronize.
void tell_copy_synchronized(const at::RecordFunction& fn, const Frame& frame) {
  const std::vector<c10::IValue>& outputs = fn.outputs();
  if (outputs.size() != 1 || !outputs[0].isTensor()) return;
  const at::Tensor& made = outputs[0].toTensor();
  if (!frame.from_device && made.is_cuda() && (made.is_contiguous() || made.scalar_type() == frame.copied_type)) {
    const cuweave_stream stream = frame.placed ? frame.stream : current_stream_ref(made.get_device());
    table->stream_synchronized(&stream);
  } else if (frame.from_device && made.is_cpu()) {  // to the host
    table->stream_synchronized(&frame.stream);
  }
}

void attach(pybind11::capsule capsule) {
  TORCH_CHECK(!attached, "cuweave's PyTorch hook is already attached on this thread");
  const auto* given = static_cast<const cuweave_hook_table*>(capsule.get_pointer());
  TORCH_CHECK(std::string(capsule.name()) == CUWEAVE_HOOK_TABLE_NAME && given->version == CUWEAVE_HOOK_TABLE_VERSION,
              "cuweave's hook table is of another version than its hook");
  table = given;
  cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  attaching_thread.store(PyThread_get_thread_ident(), std::memory_order_relaxed);
  attached = at::addThreadLocalCallback(
      at::RecordFunctionCallback(start, end).needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION}));
}

// Returns the first failure inside the callback since attach() ("" when none).
std::string detach() {
  TORCH_CHECK(attached, "cuweave's PyTorch hook is not attached on this thread");
  at::removeCallback(*attached);
  attached.reset();
  kept_through_error.clear();
  return std::exchange(failure, std::string());
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attach", &attach,
        "Places this thread's PyTorch operators in its weaves, and has the sanitizer check them, through the table in "
        "`capsule`.");
  m.def("detach", &detach, "Undoes attach() on this thread; returns the first failure inside it since (\"\": none).");
  m.def("pause", [] { paused.fetch_add(1, std::memory_order_relaxed); },
        "Stops the hook on every thread until resume(): the Python dispatch mode sees the operators meanwhile.");
  m.def("resume", [] { paused.fetch_sub(1, std::memory_order_relaxed); }, "Undoes pause().");
  m.def("running_an_operator", [] { return !frames.empty(); },
        "Whether a PyTorch operator is running on this thread, seen by the hook (the kernels it launches are the "
        "hook's to check, not another library's launch hooks').");
  m.def("host_bytes_on_streams", [] { return host_bytes_on_streams.load(std::memory_order_relaxed); },
        "Whether a stream has touched pinned host memory, as the hook saw.");
  m.def("note_host_bytes_on_streams", [] { host_bytes_on_streams.store(true, std::memory_order_relaxed); },
        "A stream has touched pinned host memory (seen by the Python dispatch mode).");
}
