// Copies between NumPy (pageable, pinned or registered) memory and device arrays, and between device arrays.
#include "bindings/common.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/host_registration.hpp"
#include "cuweave/host_transfer.hpp"
#include "cuweave/pinned_pool.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

bool is_device_side(py::handle object) {
  return py::isinstance<DeviceArray>(object) || py::hasattr(object, "__cuda_array_interface__") ||
         (py::hasattr(object, "__dlpack__") && !py::isinstance<py::array>(object));
}

py::array host_array(py::handle object, bool destination) {
  py::array array;
  if (py::isinstance<py::array>(object)) {
    array = py::reinterpret_borrow<py::array>(object);
  } else if (PyObject_CheckBuffer(object.ptr()) && !destination) {
    array = py::module_::import("numpy").attr("asarray")(object);
  } else {
    throw WrongType(std::string("expected a numpy.ndarray (host) or a device array, got ") + Py_TYPE(object.ptr())->tp_name);
  }
  if (array.dtype().attr("hasobject").cast<bool>()) throw WrongType("arrays of Python objects cannot be copied to a GPU");
  CUWEAVE_EXPECTS(array.flags() & py::array::c_style,
                  "the host array is not C-contiguous; pass numpy.ascontiguousarray(a)");
  if (destination) {
    CUWEAVE_EXPECTS(array.writeable(), "the destination NumPy array is read-only; pass a writable array");
  }
  return array;
}

std::vector<std::int64_t> shape_of(const py::array& array) {
  return std::vector<std::int64_t>(array.shape(), array.shape() + array.ndim());
}

std::string typestr_of(const py::array& array) {
  return dtype_from_python(array.dtype()).typestr;
}


// What a host array's copy must keep alive: the array (which owns any pinned block) and its registration.
Holds host_holds(const py::array& array) {
  Holds holds{hold_python(array)};
  if (array.nbytes() > 0) {
    if (auto registration = HostRegistration::find(array.data(), static_cast<std::size_t>(array.nbytes()))) {
      holds.push_back(std::move(registration));
    }
  }
  return holds;
}


namespace {

// An async copy's completion: wait on it, poll it, or hand its event to another stream.
struct Transfer {
  std::shared_ptr<Event> event;
  py::object destination;
  const char* route = nullptr;  // between two devices: "peer" (direct) or "through host"; else none
};

std::shared_ptr<Event> record_completion(Stream& stream) {
  std::shared_ptr<Event> event = Event::pooled(stream.device());
  trace::Unobserved bookkeeping;  // what the Transfer follows, not an operation of the user's
  event->record(stream);
  return event;
}

// What every device array an operation touches must be, whichever stream it is used on.
void check_layout(const DeviceArray& array, bool written) {
  CUWEAVE_EXPECTS(array.contiguous(), "the device array is not contiguous; this operation needs contiguous arrays");
  if (written) CUWEAVE_EXPECTS(!array.readonly(), "the device array written to is read-only");
}

// Note [Copies between devices]
// A copy between two devices' arrays is queued on a stream of either device (CUDA copies across devices
// on any stream, by unified addresses). The array on the stream's device follows the stream as usual
// (Note [Memory follows its stream]); the other is held until the copy completes, its free staying in its
// own device's order (a free may not be queued on another device's stream). Peer access between the two
// devices is enabled on first use where the hardware allows, both ways and with each device's pool granted to
// the other (CUDA's peer access does not cover stream-ordered pools, whose memory a copy may then not touch):
// the copy goes directly over the link. Else cudaMemcpyPeerAsync stages it through the host. The Transfer says
// which (route). A copy between devices always takes a copy engine (by_kernel applies within one device).
const char* order_peer_copy(DeviceArray& dst, DeviceArray& src, const std::shared_ptr<Stream>& stream, Holds& holds) {
  check_layout(dst, true);
  check_layout(src, false);
  DeviceArray& local = stream->device() == dst.device() ? dst : src;
  DeviceArray& remote = &local == &dst ? src : dst;
  if (local.device() != stream->device()) {
    throw InvalidArgument("a copy from device " + std::to_string(src.device()) + " to device " +
                          std::to_string(dst.device()) + " is queued on a stream of one of them, not of device " +
                          std::to_string(stream->device()));
  }
  add_uses(holds, local, stream);
  holds.push_back(remote.memory_hold());
  return backend().memory().enable_peer_access(stream->device(), remote.device()) ? "peer" : "through host";
}

Transfer copy_async(py::handle destination, py::handle source, py::handle stream_arg, bool by_kernel) {
  const CopyBy by = by_kernel ? CopyBy::kKernelWhereReachable : CopyBy::kCopyEngine;
  const bool device_destination = is_device_side(destination);
  const bool device_source = is_device_side(source);
  if (!device_destination && !device_source) {
    throw WrongType("copy_async copies host<->device or device<->device; both arguments are host arrays "
                    "(use numpy.copyto for host to host)");
  }
  std::shared_ptr<Stream> stream = stream_for(stream_arg, [&] {
    std::vector<sanitizer::Access> accesses;  // the device side; the host waits for a Transfer itself
    if (device_source) accesses.push_back(sanitizer::touches(*as_device_array(source), sanitizer::AccessKind::Read));
    if (device_destination) {
      accesses.push_back(sanitizer::touches(*as_device_array(destination), sanitizer::AccessKind::Write));
    }
    return accesses;
  });
  const char* route = nullptr;
  if (device_destination && device_source) {
    auto dst = as_device_array(destination);
    auto src = as_device_array(source);
    check_same_layout("the source", src->shape(), src->dtype().typestr, dst->shape(), dst->dtype().typestr);
    Holds holds;
    if (dst->device() == src->device()) {
      check_usable_on(*dst, *stream, true);
      check_usable_on(*src, *stream, false);
      add_uses(holds, *dst, stream);
      add_uses(holds, *src, stream);
      ReleaseGil release;
      stream->copy_async(dst->data(), src->data(), dst->nbytes(), std::move(holds), by);
    } else {
      route = order_peer_copy(*dst, *src, stream, holds);
      ReleaseGil release;
      stream->copy_between_devices(dst->data(), dst->device(), src->data(), src->device(), dst->nbytes(),
                                   std::move(holds));
    }
    dst->set_stream(stream);
  } else if (device_destination) {
    auto dst = as_device_array(destination);
    py::array src = host_array(source, false);
    check_same_layout("the source", shape_of(src), typestr_of(src), dst->shape(), dst->dtype().typestr);
    check_usable_on(*dst, *stream, true);
    Holds holds = host_holds(src);
    add_uses(holds, *dst, stream);
    {
      ReleaseGil release;
      copy_host_to_device(*stream, dst->data(), src.data(), dst->nbytes(), std::move(holds), by);
    }
    dst->set_stream(stream);
  } else {
    py::array dst = host_array(destination, true);
    auto src = as_device_array(source);
    check_same_layout("the source", src->shape(), src->dtype().typestr, shape_of(dst), typestr_of(dst));
    check_usable_on(*src, *stream, false);
    Holds holds = host_holds(dst);
    add_uses(holds, *src, stream);
    ReleaseGil release;
    copy_device_to_host(*stream, dst.mutable_data(), src->data(), src->nbytes(), std::move(holds), by);
  }
  return Transfer{record_completion(*stream), py::reinterpret_borrow<py::object>(destination), route};
}

std::shared_ptr<DeviceArray> to_device(py::handle source, py::handle stream_arg) {
  if (is_device_side(source)) {
    throw WrongType("to_device() copies host data; this is already a GPU array (use cuweave.asarray for a view)");
  }
  py::array src = host_array(source, false);
  DType dtype = dtype_from_python(src.dtype());
  // Inside a weave: new memory, so nothing to follow; the allocation tells the weave what it writes.
  std::shared_ptr<Stream> stream = stream_for(stream_arg, [] { return std::vector<sanitizer::Access>{}; });
  auto array = DeviceArray::allocate(shape_of(src), std::move(dtype), stream);
  Holds holds = host_holds(src);
  add_uses(holds, *array, stream);
  ReleaseGil release;
  copy_host_to_device(*stream, array->data(), src.data(), array->nbytes(), std::move(holds));
  return array;
}

}  // namespace

namespace {
// Pinned pool memory for a result, per `pinned`: True always, None when Note [Pinned results for
// recurring sizes] says so (falling back to ordinary memory when pinned memory runs out), False never.
std::shared_ptr<PinnedBlock> result_block(std::size_t bytes, py::handle pinned) {
  if (!pinned.is_none()) return pinned.cast<bool>() ? take_pinned_block(bytes) : nullptr;
  if (bytes < kStagedCopyThreshold) return nullptr;
  PinnedPool& pool = PinnedPool::instance();
  if (auto block = pool.try_allocate_cached(bytes)) return block;
  ReleaseGil release;
  try {
    return pool.allocate_if_recurring(bytes);
  } catch (const BackendError&) {
    return nullptr;  // out of pinned memory: ordinary memory still works
  }
}
}  // namespace

void add_uses(Holds& holds, DeviceArray& array, const std::shared_ptr<Stream>& stream) {
  if (!stream) {  // a graph node: no stream order, the graph holds the memory
    holds.push_back(array.memory_hold());
    return;
  }
  for (Hold& hold : array.uses_on(stream)) holds.push_back(std::move(hold));
}

void check_usable_on(const DeviceArray& array, const Stream& stream, bool written) {
  check_layout(array, written);
  if (array.device() != stream.device()) {
    throw InvalidArgument("the array is on device " + std::to_string(array.device()) + " but the stream is on device " +
                          std::to_string(stream.device()) + "; use a stream of the array's device");
  }
}

py::array device_to_numpy(const std::shared_ptr<DeviceArray>& array, py::handle stream_arg, py::handle out,
                          py::handle pinned) {
  py::array result;
  if (out.is_none()) {
    if (std::shared_ptr<PinnedBlock> block = result_block(array->nbytes(), pinned)) {
      // The copy engine writes pinned memory directly, at the link's speed.
      result = numpy_on(std::move(block), dtype_to_python(array->dtype()), array->shape());
    } else {
      std::vector<py::ssize_t> extents(array->shape().begin(), array->shape().end());
      result = py::array(dtype_to_python(array->dtype()), extents);
    }
  } else {
    CUWEAVE_EXPECTS(pinned.is_none() || !pinned.cast<bool>(), "pass either out= or pinned=True, not both");
    result = host_array(out, true);
    check_same_layout("out", shape_of(result), typestr_of(result), array->shape(), array->dtype().typestr);
  }
  std::shared_ptr<Stream> stream = stream_for(stream_arg, [&] {
    return std::vector<sanitizer::Access>{sanitizer::touches(*array, sanitizer::AccessKind::Read)};
  });
  Capture::refuse_wait(*stream, "cudaEventSynchronize",
                       "to_numpy() (it waits for its copy; use copy_async into a pinned array instead)");
  check_usable_on(*array, *stream, false);
  Holds holds = host_holds(result);
  add_uses(holds, *array, stream);
  ReleaseGil release;
  copy_device_to_host(*stream, result.mutable_data(), array->data(), array->nbytes(), std::move(holds));
  const std::shared_ptr<Event> done = Event::pooled(stream->device());
  {
    trace::Unobserved bookkeeping;
    done->record(*stream);
  }
  done->synchronize();
  LifetimeTracker::instance().collect();
  return result;
}

void bind_copy(py::module_& m) {
  py::class_<Transfer>(m, "Transfer", "The completion of an async copy: wait(), done, event, dst.")
      .def_readonly("event", &Transfer::event, "An Event recorded right after the copy; other streams may wait on it.")
      .def_readonly("dst", &Transfer::destination)
      .def_property_readonly(
          "route",
          [](const Transfer& t) -> py::object { return t.route ? py::object(py::str(t.route)) : py::none(); },
          "Between two devices: \"peer\" (directly over the link) or \"through host\"; None otherwise.")
      .def_property_readonly("done", [](const Transfer& t) { return t.event->complete(); })
      .def("query", [](const Transfer& t) { return t.event->complete(); })
      .def(
          "wait",
          [](const Transfer& t) {
            {
              ReleaseGil release;
              t.event->synchronize();
              LifetimeTracker::instance().collect();
            }
            return t.destination;
          },
          "Blocks until the copy has completed (the GIL is released); returns the destination.");

  m.def("copy_async", &copy_async, py::arg("dst"), py::arg("src"), py::kw_only(), py::arg("stream") = py::none(),
        py::arg("by_kernel") = false,
        "Queues a copy of src into dst on `stream` (default: current) and returns a Transfer. Host sides are NumPy "
        "arrays (pageable, pinned or registered); device sides are DeviceArrays or GPU arrays of other libraries. "
        "Everything it touches stays alive until it completes. Does not synchronize the stream. by_kernel=True: "
        "copy with a kernel on the stream's device instead of a copy engine where that device reaches both sides "
        "directly (its memory, pinned host memory; else a copy engine as usual): lower latency for copies up to "
        "a few hundred KB, at the cost of SMs.");
  m.def("to_device", &to_device, py::arg("array"), py::kw_only(), py::arg("stream") = py::none(),
        "A new DeviceArray holding a copy of a NumPy array, ordered on `stream` (default: current). Does not wait.");
}

}  // namespace cuweave::bindings
