// Stream, the default streams, the current-stream stack, host callbacks and StreamPool.
#include <chrono>
#include <optional>

#include "bindings/arrays.hpp"
#include "bindings/devices.hpp"
#include "bindings/gil.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_callbacks.hpp"
#include "bindings/python_holds.hpp"
#include "bindings/streams.hpp"
#include "cuweave/adopted_stream.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/services.hpp"
#include "cuweave/sm_partition.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/stream_pool.hpp"

namespace cuweave::bindings {

namespace {

// A priority as the caller wrote it; checked for type before any device is touched.
struct PriorityRequest {
  std::string name;  // "low", "normal", "high", or empty for a numeric value
  int value = 0;
};

PriorityRequest parse_priority(py::handle priority) {
  if (priority.is_none()) return {"normal", 0};
  if (py::isinstance<py::str>(priority)) {
    std::string name = priority.cast<std::string>();
    if (name != "low" && name != "normal" && name != "high") {
      throw InvalidArgument("unknown stream priority '" + name + "'; use \"low\", \"normal\", \"high\" or an int");
    }
    return {name, 0};
  }
  if (py::isinstance<py::bool_>(priority) || !PyIndex_Check(priority.ptr())) {
    throw WrongType(std::string("stream priority must be \"low\", \"normal\", \"high\" or an int, not ") +
                    Py_TYPE(priority.ptr())->tp_name);
  }
  return {"", py::cast<int>(priority)};
}

int resolve_priority(const PriorityRequest& request, int device) {
  if (request.name.empty()) return request.value;
  const DeviceProperties props = backend().devices().device_properties(device);
  if (request.name == "high") return props.highest_priority;
  if (request.name == "low") return props.lowest_priority;
  return std::min(std::max(0, props.highest_priority), props.lowest_priority);  // CUDA's default priority
}

std::shared_ptr<Stream> default_stream_for(StreamHandle handle, int device) {
  if (handle == backend().streams().per_thread_default_stream()) return DefaultStream::per_thread(device);
  return DefaultStream::legacy(device);
}

std::optional<std::chrono::duration<double>> timeout_from(py::handle timeout) {
  if (timeout.is_none()) return std::nullopt;
  const double seconds = timeout.cast<double>();
  CUWEAVE_EXPECTS(seconds >= 0, "timeout must not be negative");
  return std::chrono::duration<double>(seconds);
}

}  // namespace

std::shared_ptr<Stream> adopt_foreign_stream(py::handle object, bool allow_raw_handle) {
  if (py::isinstance<Stream>(object)) return object.cast<std::shared_ptr<Stream>>();
  py::object handle_object;
  if (py::hasattr(object, "__cuda_stream__")) {
    py::tuple protocol = object.attr("__cuda_stream__")();
    if (protocol.size() != 2 || protocol[0].cast<int>() != 0) {
      throw InvalidArgument("unsupported __cuda_stream__ result; expected (0, handle)");
    }
    handle_object = protocol[1];
  } else if (py::hasattr(object, "cuda_stream")) {  // torch.cuda.Stream
    handle_object = object.attr("cuda_stream");
  } else if (py::hasattr(object, "ptr") && py::hasattr(object, "synchronize")) {  // cupy.cuda.Stream
    handle_object = object.attr("ptr");
  } else if (allow_raw_handle && PyIndex_Check(object.ptr()) && !py::isinstance<py::bool_>(object)) {
    handle_object = py::reinterpret_borrow<py::object>(object);
  } else {
    throw WrongType(std::string("expected a cuweave.Stream or an object with __cuda_stream__, got ") +
                    Py_TYPE(object.ptr())->tp_name +
                    (allow_raw_handle ? "" : " (adopt a raw handle explicitly with cuweave.Stream.from_external(int))"));
  }
  const auto value = handle_object.cast<std::uintptr_t>();
  auto* handle = reinterpret_cast<StreamHandle>(value);
  const StreamBackend& streams = backend().streams();
  if (value == 0 || handle == streams.legacy_default_stream() || handle == streams.per_thread_default_stream()) {
    const StreamHandle default_handle = value == 0 ? streams.legacy_default_stream() : handle;
    return default_stream_for(default_handle, backend().devices().current_device());
  }
  return AdoptedStream::adopt(handle, hold_python(object));
}

const std::shared_ptr<Stream>* exact_stream(PyObject* object) {
  static const py::detail::type_info* const info = py::detail::get_type_info(typeid(Stream));
  return exact_holder<Stream>(object, info);
}

std::shared_ptr<Stream> resolve_stream(py::handle stream) {
  if (stream.is_none()) return current_stream::get();
  // The usual `stream=`: pybind11's caster cost a built-in op with a stream named a tenth of its host work.
  if (const std::shared_ptr<Stream>* held = exact_stream(stream.ptr())) return *held;
  const py::detail::loader_life_support temporaries;  // Note [Casts off the launch's fast path] in bind_kernel.cpp
  if (py::isinstance<Stream>(stream)) return stream.cast<std::shared_ptr<Stream>>();
  return adopt_foreign_stream(stream);
}

std::shared_ptr<Stream> named_stream(py::handle stream) {
  return stream.is_none() ? nullptr : resolve_stream(stream);
}

void synchronize_stream(Stream& stream, const char* where) {
  {
    ReleaseGil release;
    stream.synchronize();
  }
  if (Hold error = stream.take_callback_error()) raise_stored_callback_error(error, where);
}

namespace {
// cuweave's streams are non-blocking unless blocking=True; PyTorch and CuPy spell that the other way round.
constexpr Spelling kNonBlocking{"non_blocking", "blocking=False (the default: cuweave's streams do not block)",
                                "CuPy's"};
const CallShape kStreamCall{"Stream()", "Stream(*, priority=None, blocking=False, device=None, name='', partition=None)",
                            {kNonBlocking}};

// A stream on an SM partition: its device is the partition's, and CUDA makes it non-blocking.
std::shared_ptr<Stream> stream_on_partition(py::handle partition, bool blocks, py::handle device, int priority_of_request,
                                            std::string label) {
  if (!py::isinstance<SmPartition>(partition)) {
    throw WrongType("partition must be a cuweave.SMPartition (made by cuweave.Device(n).partition(sms)), not " +
                    std::string(py::str(py::type::handle_of(partition).attr("__name__"))));
  }
  auto made_on = partition.cast<std::shared_ptr<SmPartition>>();
  if (blocks) {
    throw InvalidArgument("a stream on an SM partition cannot be blocking: CUDA makes every stream of a green "
                          "context non-blocking; leave blocking=False");
  }
  if (!device.is_none() && resolve_device(device) != made_on->device()) {
    throw InvalidArgument("device=" + std::to_string(resolve_device(device)) + " differs from the partition's device " +
                          std::to_string(made_on->device()) + "; leave device out: a partition's stream is on its device");
  }
  return OwnedStream::create_on(std::move(made_on), priority_of_request, std::move(label));
}
const CallShape kStreamPoolCall{"StreamPool()",
                                "StreamPool(size=4, *, priority=None, blocking=False, device=None, name='')", {kNonBlocking}};
}  // namespace

void bind_stream(py::module_& m) {
  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream", R"doc(
A CUDA stream: work queued on it runs in order; work on different streams may overlap.

``with stream:`` makes it this thread's current stream (nestable); cuweave operations given no
``stream=`` are ordered on the current stream.)doc")
      .def(py::init([](py::handle priority, py::handle blocking, py::handle device, py::handle name,
                       py::handle partition) {
             const bool blocks = flag(blocking, "Stream()", "blocking");
             std::string label = text(name, "Stream()", "name");
             const PriorityRequest request = parse_priority(priority);
             if (!partition.is_none()) {
               const int ordinal = py::isinstance<SmPartition>(partition)
                                       ? partition.cast<const SmPartition&>().device()
                                       : resolve_device(device);
               return stream_on_partition(partition, blocks, device, resolve_priority(request, ordinal),
                                          std::move(label));
             }
             const int ordinal = resolve_device(device);
             return OwnedStream::create(ordinal, resolve_priority(request, ordinal), blocks, std::move(label));
           }),
           py::kw_only(), py::arg("priority") = py::none(), py::arg("blocking") = false,
           py::arg("device") = py::none(), py::arg("name") = "", py::arg("partition") = py::none(),
           "New stream. priority: \"low\" | \"normal\" | \"high\" | int in the device's range. blocking=True "
           "makes it synchronize with the legacy default stream. name labels it in traces and its repr. "
           "partition: a cuweave.SMPartition whose SMs alone run this stream's kernels.")
      .def(py::init(misfit_init<Stream>(kStreamCall)))
      .def_static("from_external", [](py::handle stream) { return adopt_foreign_stream(stream, true); },
                  py::arg("stream"),
                  "Adopts a stream made elsewhere (anything with __cuda_stream__, a torch or cupy stream, or an int "
                  "handle) without owning it; the foreign object is kept alive (an int handle's owner keeps the stream "
                  "alive for as long as the adoption lives: the sanitizer may ask CUDA about it until then). An "
                  "adoption of a cuweave stream closes with that stream.")
      .def_property_readonly("handle", [](const Stream& s) { return reinterpret_cast<std::uintptr_t>(s.handle()); })
      .def_property_readonly("device", &Stream::device)
      .def_property_readonly("priority", &Stream::priority)
      .def_property_readonly("blocking", &Stream::blocking)
      .def_property_readonly("closed", &Stream::closed)
      .def_property_readonly("partition", &Stream::partition,
                             "The cuweave.SMPartition this stream was made on, or None.")
      .def_property_readonly("kind", &Stream::origin)
      .def_property_readonly("name", &Stream::name, "The name given at creation (\"\" if none); traces label its lane with it.")
      .def("query", &Stream::idle, "True when all work queued on this stream has completed (never blocks).")
      .def(
          "synchronize",
          [](Stream& self) { synchronize_stream(self, "Stream.synchronize()"); },
          "Blocks until all queued work and host callbacks have completed (the GIL is released). Raises "
          "CallbackError if a host callback on this stream raised.")
      .def(
          "launch_host_func",
          [](std::shared_ptr<Stream> self, py::object function, py::args args, bool ordered) {
            std::function<void()> callback =
                python_host_callback(function, args, "launch_host_func", "a cuweave host callback");
            std::string name = callable_name(function);
            UnblockedEnqueue unblocked;
            services().host_callbacks().launch(self, std::move(callback), std::move(name), ordered);
          },
          py::arg("function"), py::kw_only(), py::arg("ordered") = false,
          "Calls ``function(*args)`` on cuweave's callback thread once the work queued so far has completed. "
          "By default later work on the stream does not wait for it; with ordered=True it does (CUDA's "
          "semantics: the stream waits until the callable has returned or raised; not inside a capture). "
          "synchronize() waits for it either way and re-raises its exception as CallbackError.")
      .def("close", &Stream::close, "Destroys this stream (queued work still completes). Later use raises ValueError.")
      .def("__cuda_stream__",
           [](const Stream& s) { return py::make_tuple(0, reinterpret_cast<std::uintptr_t>(s.handle())); })
      .def("__eq__",
           [](const Stream& self, py::handle other) {
             if (!py::isinstance<Stream>(other)) return false;
             const Stream& that = other.cast<const Stream&>();
             return &self == &that || (self.same_queue(that) && !self.closed() && !that.closed());
           })
      .def("__hash__",
           [](const Stream& s) { return std::hash<std::uintptr_t>()(reinterpret_cast<std::uintptr_t>(s.raw_handle())); })
      .def("__repr__", [](const Stream& s) {
        if (s.closed()) return std::string("<cuweave.Stream closed>");
        return "<cuweave.Stream " + (s.name().empty() ? std::string() : "'" + s.name() + "' ") +
               std::string(s.origin()) + " handle=0x" +
               py::str(py::int_(reinterpret_cast<std::uintptr_t>(s.raw_handle())).attr("__format__")("x"))
                   .cast<std::string>() +
               " device=" + std::to_string(s.device()) + " priority=" + std::to_string(s.priority()) +
               (s.blocking() ? " blocking" : " non-blocking") +
               (s.partition() ? " on " + std::to_string(s.partition()->sms()) + " SMs" : std::string()) + ">";
      });

  m.def("default_stream", [](py::handle device) { return DefaultStream::legacy(resolve_device(device)); },
        py::arg("device") = py::none(), "The legacy default stream (handle 1), which synchronizes with blocking streams.");
  m.def("per_thread_default_stream", [](py::handle device) { return DefaultStream::per_thread(resolve_device(device)); },
        py::arg("device") = py::none(), "The per-thread default stream (handle 2): each thread's own.");
  m.def("current_stream", &current_stream::get,
        "This thread's current stream: the innermost `with stream:`, else the legacy default stream.");

  py::class_<StreamLease>(m, "StreamLease", "Exclusive use of one StreamPool stream until released.")
      .def(py::init(made_elsewhere<StreamLease>("StreamLease", "StreamPool.reserve() lends one")))
      .def_property_readonly("stream",
                             [](const StreamLease& lease) {
                               if (!lease.active()) throw InvalidArgument("this StreamLease was released");
                               return lease.stream();
                             })
      .def_property_readonly("active", &StreamLease::active)
      .def("release", &StreamLease::release)
      .def("__enter__",
           [](const StreamLease& lease) {
             if (!lease.active()) throw InvalidArgument("this StreamLease was released; reserve a new one");
             return lease.stream();
           })
      .def("__exit__", [](StreamLease& lease, py::handle, py::handle, py::handle) { lease.release(); });

  py::class_<StreamPool, std::shared_ptr<StreamPool>>(m, "StreamPool", R"doc(
A fixed set of streams of one device and priority: ``next()`` hands them out round-robin,
``reserve()`` lends one exclusively (as a context manager) until released.)doc")
      .def(py::init([](py::handle size, py::handle priority, py::handle blocking, py::handle device, py::handle name) {
             if (py::isinstance<py::bool_>(size) || !PyIndex_Check(size.ptr())) {
               throw WrongType("StreamPool size must be an int");
             }
             const auto count = py::cast<long long>(size);
             CUWEAVE_EXPECTS(count > 0, "a StreamPool needs at least one stream; pass size >= 1");
             const PriorityRequest request = parse_priority(priority);
             const int ordinal = resolve_device(device);
             return StreamPool::create(static_cast<std::size_t>(count), ordinal, resolve_priority(request, ordinal),
                                       flag(blocking, "StreamPool()", "blocking"), text(name, "StreamPool()", "name"));
           }),
           py::arg("size") = 4, py::kw_only(), py::arg("priority") = py::none(), py::arg("blocking") = false,
           py::arg("device") = py::none(), py::arg("name") = "",
           "A pool of `size` streams; `name` names them in traces (\"name[0]\", \"name[1]\", ...).")
      .def(py::init(misfit_init<StreamPool>(kStreamPoolCall)))
      .def("next", &StreamPool::next, "The next unreserved stream, round-robin.")
      .def(
          "reserve",
          [](StreamPool& pool, py::handle timeout) {
            auto limit = timeout_from(timeout);
            ReleaseGil release;
            return std::make_unique<StreamLease>(pool.reserve(limit));
          },
          py::arg("timeout") = py::none(),
          "Reserves a stream until the lease is released (use it as a context manager). Waits for one to be "
          "released when all are reserved; TimeoutError after `timeout` seconds.")
      .def_property_readonly("size", &StreamPool::size)
      .def_property_readonly("reserved_count", &StreamPool::reserved_count)
      .def_property_readonly("device", &StreamPool::device)
      .def_property_readonly("priority", &StreamPool::priority)
      .def("__len__", &StreamPool::size);
}

}  // namespace cuweave::bindings
