// Copies between NumPy (pageable, pinned or registered) memory and device arrays, and between device arrays.
#include "bindings/arrays.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/host_reads.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pinned_arrays.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_holds.hpp"
#include "bindings/streams.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/host_registration.hpp"
#include "cuweave/host_transfer.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/pinned_pool.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

bool is_device_side(py::handle object) {
  return py::isinstance<DeviceArray>(object) || py::hasattr(object, "__cuda_array_interface__") ||
         (py::hasattr(object, "__dlpack__") && !py::isinstance<py::array>(object));
}

py::array host_array(py::handle object, bool destination) {
  py::array array;
  if (py::isinstance<py::array>(object)) {
    array = py::reinterpret_borrow<py::array>(object);
  } else if (!destination && (PyObject_CheckBuffer(object.ptr()) || PyList_Check(object.ptr()) ||
                               PyTuple_Check(object.ptr()) || PyBool_Check(object.ptr()) ||
                               PyLong_Check(object.ptr()) || PyFloat_Check(object.ptr()) ||
                               PyComplex_Check(object.ptr()))) {
    // Lists and scalars become the array NumPy makes of them (numpy.asarray's dtype).
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
void check_layout(const DeviceArray& array, bool written, Layouts layouts = Layouts::Contiguous) {
  CUWEAVE_EXPECTS(layouts == Layouts::Strided || array.contiguous(),
                  "this operation takes contiguous arrays, and this one is a strided view; pass a contiguous copy "
                  "of it, made with .copy() or cuweave.ascontiguousarray()");
  if (written) CUWEAVE_EXPECTS(!array.readonly(), "the device array written to is read-only");
}

}  // namespace

// Note [Copies between devices]
// A copy between two devices' arrays is queued on a stream of either device (CUDA copies across devices
// on any stream, by unified addresses). The array on the stream's device follows the stream as usual
// (Note [Memory follows its stream]); the other is held until the copy completes, its free staying in its
// own device's order (a free may not be queued on another device's stream). Peer access between the two
// devices is enabled on first use where the hardware allows, both ways and with each device's pool granted to
// the other (CUDA's peer access does not cover stream-ordered pools, whose memory a copy may then not touch):
// the copy goes directly over the link. Else cudaMemcpyPeerAsync stages it through the host. The Transfer says
// which (route). A copy between devices always takes a copy engine (by_kernel applies within one device).
const char* peer_copy_route(DeviceArray& dst, DeviceArray& src, const std::shared_ptr<Stream>& stream) {
  check_layout(dst, true);
  check_layout(src, false);
  DeviceArray& local = stream->device() == dst.device() ? dst : src;
  DeviceArray& remote = &local == &dst ? src : dst;
  if (local.device() != stream->device()) {
    throw InvalidArgument("a copy from device " + std::to_string(src.device()) + " to device " +
                          std::to_string(dst.device()) + " is queued on a stream of one of them, not of device " +
                          std::to_string(stream->device()));
  }
  return backend().memory().enable_peer_access(stream->device(), remote.device()) ? "peer" : "through host";
}

namespace {

Transfer copy_async(py::handle destination, py::handle source, py::handle stream_arg, py::handle by_kernel) {
  const CopyBy by = flag(by_kernel, "copy_async()", "by_kernel") ? CopyBy::KernelWhereReachable : CopyBy::CopyEngine;
  const bool device_destination = is_device_side(destination);
  const bool device_source = is_device_side(source);
  if (!device_destination && !device_source) {
    throw WrongType("copy_async copies host<->device or device<->device; both arguments are host arrays "
                    "(use numpy.copyto for host to host)");
  }
  // The device side; the host side (a NumPy array) is the copy's own, and the host waits for a Transfer itself.
  Operation operation("copy");
  std::shared_ptr<DeviceArray> dst = device_destination ? as_device_array(destination) : nullptr;
  std::shared_ptr<DeviceArray> src = device_source ? as_device_array(source) : nullptr;
  if (src) operation.reads(src);
  if (dst) operation.writes(dst);
  std::shared_ptr<Stream> stream = place(operation, named_stream(stream_arg));
  if ((dst && !src && !dst->contiguous()) || (src && !dst && !src->contiguous())) {
    // A strided view on the device side of a copy to or from the host: through a contiguous copy of it, on the
    // same stream (a gather before, or a scatter after).
    const py::object on = py::cast(stream);
    if (src && !src->contiguous()) {
      return copy_async(destination, py::cast(contiguous_copy(src, on, false)), on, by_kernel);
    }
    std::shared_ptr<DeviceArray> staged;
    {
      UnblockedEnqueue unblocked;
      staged = DeviceArray::allocate(dst->shape(), dst->dtype(), stream);
    }
    const py::object staged_object = py::cast(staged);
    copy_async(staged_object, source, on, by_kernel);
    return copy_async(destination, staged_object, on, py::bool_(false));
  }
  const char* route = nullptr;
  if (dst && src) {
    check_same_layout("the source", src->shape(), src->dtype().typestr, dst->shape(), dst->dtype().typestr);
    if (dst->device() == src->device()) {
      check_usable(operation, *stream, Layouts::Strided);
      ReleaseGil release;
      if (dst->contiguous() && src->contiguous()) {
        stream->copy_async(operation, dst->data(), src->data(), dst->nbytes(), by);
      } else {
        copy_elements(operation, *stream, *dst, *src);
      }
    } else {
      route = peer_copy_route(*dst, *src, stream);
      ReleaseGil release;
      stream->copy_between_devices(operation, dst->data(), dst->device(), src->data(), src->device(), dst->nbytes());
    }
  } else if (dst) {
    py::array host = host_array(source, false);
    check_same_layout("the source", shape_of(host), typestr_of(host), dst->shape(), dst->dtype().typestr);
    check_usable(operation, *stream);
    operation.keep_alive(host_holds(host));
    ReleaseGil release;
    copy_host_to_device(operation, *stream, dst->data(), host.data(), dst->nbytes(), by);
  } else {
    py::array host = host_array(destination, true);
    check_same_layout("the source", src->shape(), src->dtype().typestr, shape_of(host), typestr_of(host));
    check_usable(operation, *stream);
    operation.keep_alive(host_holds(host));
    ReleaseGil release;
    copy_device_to_host(operation, *stream, host.mutable_data(), src->data(), src->nbytes(), by);
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
  Operation operation("copy");
  std::shared_ptr<Stream> stream = place(operation, named_stream(stream_arg));
  auto array = DeviceArray::allocate(shape_of(src), std::move(dtype), stream);
  operation.writes(array).keep_alive(host_holds(src));
  ReleaseGil release;
  copy_host_to_device(operation, *stream, array->data(), src.data(), array->nbytes());
  return array;
}

// Note [Batched copies]: one operation for the whole batch.
py::list to_device_batch(py::handle sources, py::handle stream_arg) {
  if (py::isinstance<py::array>(sources) || !py::isinstance<py::sequence>(sources) || py::isinstance<py::str>(sources)) {
    throw WrongType(std::string("to_device_batch() takes a list or tuple of NumPy arrays, not ") +
                    Py_TYPE(sources.ptr())->tp_name + " (for one array, use to_device)");
  }
  std::vector<py::array> hosts;
  for (py::handle source : py::reinterpret_borrow<py::sequence>(sources)) {
    if (is_device_side(source)) {
      throw WrongType("to_device_batch() copies host data; an item is already a GPU array (use cuweave.asarray for "
                      "a view)");
    }
    hosts.push_back(host_array(source, false));
  }
  Operation operation("copy");
  std::shared_ptr<Stream> stream = place(operation, named_stream(stream_arg));
  py::list arrays;
  std::vector<HostToDevice> copies;
  for (const py::array& host : hosts) {
    std::vector<std::int64_t> shape = shape_of(host);
    DType dtype = dtype_from_python(host.dtype());
    std::shared_ptr<DeviceArray> array;
    {
      UnblockedEnqueue unblocked;  // the GIL released: nothing of Python's in here
      array = DeviceArray::allocate(std::move(shape), std::move(dtype), stream);
    }
    operation.writes(array).keep_alive(host_holds(host));
    copies.push_back(HostToDevice{array->data(), host.data(), array->nbytes()});
    arrays.append(py::cast(array));
  }
  {
    ReleaseGil release;
    copy_host_to_device_batch(operation, *stream, copies);
  }
  return arrays;
}

}  // namespace

namespace {
// Pinned pool memory for a result, per `pinned`: True always, None when Note [Pinned results for
// recurring sizes] says so (falling back to ordinary memory when pinned memory runs out), False never.
std::shared_ptr<PinnedBlock> result_block(std::size_t bytes, py::handle pinned) {
  if (!pinned.is_none()) return pinned.cast<bool>() ? take_pinned_block(bytes) : nullptr;
  if (bytes < kStagedCopyThreshold) return nullptr;
  ReleaseGil release;
  try {
    return services().pinned().allocate_result(bytes);
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

void check_usable_on(const DeviceArray& array, const Stream& stream, bool written, Layouts layouts) {
  check_layout(array, written, layouts);
  if (array.device() != stream.device()) {
    throw InvalidArgument("the array is on device " + std::to_string(array.device()) + " but the stream is on device " +
                          std::to_string(stream.device()) + "; use a stream of the array's device");
  }
}

void check_usable(const Operation& operation, const Stream& stream, Layouts layouts) {
  for (const ArrayUse& use : operation.arrays()) {
    check_usable_on(*use.array, stream, use.kind != sanitizer::AccessKind::Read, layouts);
  }
}

namespace {
std::shared_ptr<Stream> placed_on(Operation& operation, std::shared_ptr<Stream> given, Layouts layouts) {
  std::shared_ptr<Stream> stream = place_reading_copies(operation, std::move(given));
  check_usable(operation, *stream, layouts);
  return stream;
}
}  // namespace

std::shared_ptr<Stream> placed(Operation& operation, py::handle stream_arg, Layouts layouts) {
  return placed_on(operation, named_stream(stream_arg), layouts);
}

std::shared_ptr<Stream> host_read_placed(Operation& operation, const DeviceArray& array, py::handle stream_arg,
                                         Layouts layouts) {
  std::shared_ptr<Stream> given = named_stream(stream_arg);
  if (!given && !Weave::active()) {
    // Note [Host reads follow the writer]: an array of another device than the current stream's is read there.
    const std::shared_ptr<Stream> current = current_stream::get();
    given = current->device() == array.device() ? current : DefaultStream::legacy(array.device());
  }
  return placed_on(operation, std::move(given), layouts);
}

// Note [Host reads follow the writer]
// A host read named no stream (to_numpy() with no stream=) runs on the current stream, as PyTorch's .cpu() does,
// and after the work that writes the array: the array knows the stream its producing work was ordered on (each
// cuweave operation writing it makes that stream its stream), so when that is another stream, the reading stream
// first waits for it (an event recorded there and waited for: no host synchronize, no wait for other streams).
// Without that wait, a read on the legacy default stream of an array written on a non-blocking stream copies
// whatever the memory held, silently. Work other libraries queue on the current stream stays ordered too. Inside
// a weave the weave orders the read; with stream= the caller's stream is taken as it is. An array of another device
// than the current stream's is read on its device's default stream, after its writers all the same (PyTorch reads
// a tensor on its own device's current stream): the current stream is one device's, and a host read is complete
// on return wherever it ran.
void wait_for_writer(const DeviceArray& array, Stream& reader) {
  // A view's bytes may have been written through other views of its memory, on other streams (Note [Writers
  // of shared memory]): the reader waits for each of them.
  std::vector<std::shared_ptr<Stream>> writers = array.writers();
  for (const std::shared_ptr<Stream>& writer : writers) {
    if (writer->closed() || writer->same_queue(reader)) continue;
    // Its last write is captured, not run, and waiting for the capturing stream would draw the reader into
    // the capture: refused before anything is queued, the capture intact.
    Capture::refuse_wait(*writer, "cudaStreamWaitEvent",
                         "a host read of an array whose stream is capturing (to_numpy(), item(), repr)");
  }
  reader.wait_for(writers);
}

py::array device_to_numpy(const std::shared_ptr<DeviceArray>& array, py::handle stream_arg, py::handle out,
                          py::handle pinned) {
  if (!array->contiguous()) {
    // A strided view is gathered on the device, on the reading stream after its writers, and its copy read.
    return device_to_numpy(contiguous_copy(array, stream_arg, stream_arg.is_none()), stream_arg, out, pinned);
  }
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
  read_on_host(array, stream_arg, result, 0, array->nbytes());
  return result;
}

void read_on_host(const std::shared_ptr<DeviceArray>& array, py::handle stream_arg, const py::array& destination,
                  std::size_t offset, std::size_t bytes) {
  Operation operation("copy");
  operation.reads(array);
  std::shared_ptr<Stream> stream = host_read_placed(operation, *array, stream_arg, Layouts::Contiguous);
  Capture::refuse_wait(*stream, "cudaEventSynchronize",
                       "to_numpy() (it waits for its copy; use copy_async into a pinned array instead)");
  if (stream_arg.is_none() && !Weave::active()) wait_for_writer(*array, *stream);
  operation.keep_alive(host_holds(destination));
  void* host = const_cast<void*>(destination.data());  // a writeable array the caller made or checked
  const void* device = static_cast<const char*>(array->data()) + offset;
  ReleaseGil release;
  copy_device_to_host(operation, *stream, host, device, bytes);
  const std::shared_ptr<Event> done = Event::pooled(stream->device());
  {
    trace::Unobserved bookkeeping;
    done->record(*stream);
  }
  done->synchronize();
  services().lifetimes().collect();
}

namespace {
const CallShape kToDeviceCall{"to_device()", "to_device(array, *, stream=None)"};
const CallShape kToDeviceBatchCall{"to_device_batch()", "to_device_batch(arrays, *, stream=None)"};
const CallShape kCopyAsyncCall{"copy_async()", "copy_async(dst, src, *, stream=None, by_kernel=False)",
                               {{"non_blocking",
                                 "nothing of the kind (the copy never blocks the host; Transfer.wait() waits for it)",
                                 "PyTorch's"}}};
}  // namespace

void bind_copy(py::module_& m) {
  py::class_<Transfer>(m, "Transfer", "The completion of an async copy: wait(), done, event, dst.")
      .def(py::init(made_elsewhere<Transfer>("Transfer", "cuweave.copy_async() returns one")))
      .def_readonly("event", &Transfer::event, "An Event recorded right after the copy; other streams may wait on it.")
      .def_readonly("dst", &Transfer::destination)
      .def_property_readonly(
          "route",
          [](const Transfer& t) -> py::object { return t.route ? py::object(py::str(t.route)) : py::none(); },
          "Between two devices: \"peer\" (directly over the link) or \"through host\"; None otherwise.")
      .def_property_readonly("done", [](const Transfer& t) { return t.event->complete(); })
      .def("query", [](const Transfer& t) { return t.event->complete(); })
      .def(
          "__await__",
          [](py::object self) { return py::module_::import("cuweave._awaitable").attr("transfer_await")(self); },
          "``await transfer``: waits for the copy without blocking the event loop, then returns wait()'s result.")
      .def("__repr__",
           [](const Transfer& t) {
             std::string text = std::string("<cuweave.Transfer ") + (t.event->complete() ? "done" : "pending");
             if (t.route) text += std::string(", ") + t.route;
             // What the destination is, without its values: reading them would wait for this very copy.
             const py::handle into = t.destination;
             return text + " into " + py::str(py::type::of(into).attr("__name__")).cast<std::string>() + " shape=" +
                    py::str(into.attr("shape")).cast<std::string>() + " dtype=" +
                    py::str(into.attr("dtype")).cast<std::string>() + ">";
           })
      .def(
          "wait",
          [](const Transfer& t) {
            {
              ReleaseGil release;
              t.event->synchronize();
              services().lifetimes().collect();
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
  m.def("to_device_batch", &to_device_batch, py::arg("arrays"), py::kw_only(), py::arg("stream") = py::none(),
        "New DeviceArrays holding copies of a list of NumPy arrays, ordered on `stream` (default: current), in as few "
        "calls as CUDA allows: the pinned arrays and the pageable ones under 1 MB in one batch of copies. Does not "
        "wait.");
  m.def("to_device", misfit_call(kToDeviceCall));
  m.def("to_device_batch", misfit_call(kToDeviceBatchCall));
  m.def("copy_async", misfit_call(kCopyAsyncCall));
}

}  // namespace cuweave::bindings
