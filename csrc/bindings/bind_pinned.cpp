// The pinned-memory pool, pinned NumPy arrays, and page-locking of existing arrays.
#include "bindings/devices.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pinned_arrays.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_holds.hpp"

#include <cstdio>

#include "cuweave/backend.hpp"
#include "cuweave/copy_thread_tuner.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/host_copy_threads.hpp"
#include "cuweave/host_registration.hpp"
#include "cuweave/host_transfer.hpp"
#include "cuweave/pinned_pool.hpp"
#include "cuweave/services.hpp"
#include "cuweave/staging_ring.hpp"

namespace cuweave::bindings {

std::shared_ptr<PinnedBlock> take_pinned_block(std::size_t bytes) {
  PinnedPool& pool = services().pinned();
  if (auto block = pool.try_allocate_cached(bytes)) return block;  // the common case: no GIL round trip
  ReleaseGil release;
  return pool.allocate(bytes);
}

py::array numpy_on(std::shared_ptr<PinnedBlock> block, const py::dtype& dtype, const std::vector<std::int64_t>& shape) {
  void* data = block->data();
  std::vector<py::ssize_t> extents(shape.begin(), shape.end());
  return py::array(dtype, extents, {}, data, py::cast(std::move(block)));
}

namespace {

// What a staged direction's tuner has measured (Note [Copy threads chosen as transfers run]).
py::dict copy_thread_tuning(const CopyThreadTuner& tuner) {
  py::list candidates;
  for (const CopyThreadTuner::Candidate& c : tuner.candidates()) {
    py::dict d;
    d["threads"] = c.threads;
    d["gb_per_s"] = c.median_bytes_per_second / 1e9;
    d["samples"] = c.samples;
    candidates.append(d);
  }
  py::dict d;
  d["threads"] = tuner.chosen();
  d["settled"] = tuner.settled();
  d["candidates"] = candidates;
  return d;
}

py::dtype host_dtype(py::handle dtype) {
  py::dtype result = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype));
  if (result.attr("hasobject").cast<bool>()) {
    throw WrongType("pinned arrays cannot hold Python objects (dtype " + py::str(result).cast<std::string>() +
                    "); use a numeric dtype");
  }
  return result;
}

py::array pinned_array(py::handle shape_arg, py::handle dtype_arg, bool zero) {
  std::vector<std::int64_t> shape = shape_from_python(shape_arg);
  py::dtype dtype = host_dtype(dtype_arg);
  const std::size_t count = DeviceArray::element_count(shape);
  const std::size_t bytes = count * static_cast<std::size_t>(dtype.itemsize());
  std::shared_ptr<PinnedBlock> block = take_pinned_block(bytes);
  if (zero) std::memset(block->data(), 0, bytes);
  return numpy_on(std::move(block), dtype, shape);
}

const void* host_pointer(const py::array& array) { return array.data(); }

}  // namespace

void bind_pinned(py::module_& m) {
  py::class_<PinnedBlock, std::shared_ptr<PinnedBlock>>(m, "PinnedBlock", py::buffer_protocol(), R"doc(
A block of page-locked host memory on loan from the pinned pool. It returns to the pool when the last
reference goes and every queued copy that uses it has completed.)doc")
      .def(py::init(made_elsewhere<PinnedBlock>("PinnedBlock", "cuweave.pinned_pool().allocate(nbytes) lends one")))
      .def_property_readonly("ptr", [](const PinnedBlock& b) { return reinterpret_cast<std::uintptr_t>(b.data()); })
      .def_property_readonly("nbytes", &PinnedBlock::size)
      .def_property_readonly("capacity", &PinnedBlock::capacity, "Bytes of the size class the block came from.")
      .def_buffer([](PinnedBlock& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1});
      })
      .def("__len__", &PinnedBlock::size)
      .def("__repr__", [](const PinnedBlock& b) {
        return "<cuweave.PinnedBlock nbytes=" + std::to_string(b.size()) + " capacity=" + std::to_string(b.capacity()) +
               ">";
      });

  py::class_<PinnedPool>(m, "PinnedPool", "The process-wide cache of pinned host memory (cuweave.pinned_pool()).")
      .def(py::init(made_elsewhere<PinnedPool>("PinnedPool", "cuweave.pinned_pool() returns the process's one pool")))
      .def(
          "allocate",
          [](PinnedPool&, py::handle nbytes) {
            if (py::isinstance<py::bool_>(nbytes) || !PyIndex_Check(nbytes.ptr())) {
              throw WrongType("allocate(nbytes) needs an int");
            }
            const auto bytes = py::cast<long long>(nbytes);
            CUWEAVE_EXPECTS(bytes >= 0, "cannot allocate a negative number of bytes");
            return take_pinned_block(static_cast<std::size_t>(bytes));
          },
          py::arg("nbytes"))
      .def("stats",
           [](const PinnedPool& pool) {
             const PinnedPoolStats s = pool.stats();
             py::dict d;
             d["in_use_bytes"] = s.in_use_bytes;
             d["in_use_blocks"] = s.in_use_blocks;
             d["cached_bytes"] = s.cached_bytes;
             d["cached_blocks"] = s.cached_blocks;
             d["peak_in_use_bytes"] = s.peak_in_use_bytes;
             d["hits"] = s.hits;
             d["misses"] = s.misses;
             d["results_in_use_bytes"] = s.results_in_use_bytes;
             d["results_limit_bytes"] = s.results_limit_bytes;
             return d;
           })
      .def_property(
          "results_limit",
          [](const PinnedPool& pool) { return pool.results_limit(); },
          [](PinnedPool& pool, py::handle bytes) {
            if (py::isinstance<py::bool_>(bytes) || !PyIndex_Check(bytes.ptr()) || py::cast<long long>(bytes) < 0) {
              throw WrongType("results_limit takes a number of bytes (an int >= 0; 0 keeps every result in ordinary "
                              "memory)");
            }
            pool.set_results_limit(py::cast<std::size_t>(bytes));
          },
          "The most pinned memory that to_numpy() results held at once may take (default 256 MB, or "
          "CUWEAVE_PINNED_RESULTS_MB); past it, results are in ordinary memory. pinned=True is not bounded by it.")
      .def("__repr__",
           [](const PinnedPool& pool) {
             const PinnedPoolStats s = pool.stats();
             auto size = [](std::size_t bytes) {
               char text[32];
               if (bytes < (1 << 20)) {
                 std::snprintf(text, sizeof text, "%.1f KB", static_cast<double>(bytes) / (1 << 10));
               } else {
                 std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
               }
               return std::string(text);
             };
             return "<cuweave.PinnedPool in use: " + size(s.in_use_bytes) + " in " + std::to_string(s.in_use_blocks) +
                    " blocks, cached: " + size(s.cached_bytes) + " in " + std::to_string(s.cached_blocks) +
                    " blocks, peak in use: " + size(s.peak_in_use_bytes) + "; " + std::to_string(s.hits) + " hits, " +
                    std::to_string(s.misses) + " misses>";
           })
      .def("empty_cache", &PinnedPool::empty_cache, py::call_guard<ReleaseGil>(),
           "Frees every cached block (blocks in use or still used by queued copies stay); returns the bytes freed.")
      .def_static("size_class", &PinnedPool::size_class, py::arg("nbytes"));
  m.def("pinned_pool", []() -> PinnedPool& { return services().pinned(); }, py::return_value_policy::reference);

  m.def(
      "staging_stats",
      [](py::handle device) {
        const StagingRingStats s = StagingRing::for_device(resolve_device(device)).stats();
        py::dict d;
        d["slots"] = s.slots;
        d["slot_bytes"] = s.slot_bytes;
        d["acquisitions"] = s.acquisitions;
        d["waits"] = s.waits;
        d["copy_threads"] = services().copy_threads().threads();
        d["to_device"] = copy_thread_tuning(staged_copy_tuner(StagedDirection::ToDevice));
        d["to_host"] = copy_thread_tuning(staged_copy_tuner(StagedDirection::ToHost));
        return d;
      },
      py::arg("device") = py::none(),
      "The staging ring of a device (large copies to and from ordinary NumPy memory pass through it): slots, "
      "slot_bytes, acquisitions, waits (acquisitions that waited for a slot: backpressure), copy_threads "
      "(the pool of host threads that fill and drain slots: CUWEAVE_COPY_THREADS, default up to 32), and for "
      "each direction (to_device, to_host) how many of them staged copies use now (threads), whether that "
      "choice rests on measurements of every candidate count (settled), and each candidate's median host copy "
      "rate over recent segments of large transfers (candidates: threads, gb_per_s, samples).");
  m.def(
      "host_copy",
      [](py::array destination, py::array source) {
        CUWEAVE_EXPECTS(destination.writeable(), "host_copy: the destination array is read-only");
        CUWEAVE_EXPECTS((destination.flags() & py::array::c_style) && (source.flags() & py::array::c_style),
                        "host_copy takes C-contiguous arrays (np.copyto copies any layout)");
        CUWEAVE_EXPECTS(destination.nbytes() == source.nbytes(),
                        "host_copy: the arrays differ in size (" + std::to_string(destination.nbytes()) + " and " +
                            std::to_string(source.nbytes()) + " bytes)");
        void* to = destination.mutable_data();
        const void* from = source.data();
        const auto bytes = static_cast<std::size_t>(source.nbytes());
        py::gil_scoped_release release;
        services().copy_threads().copy(to, from, bytes, /*streaming=*/true);
      },
      py::arg("destination"), py::arg("source"),
      "Copies source's bytes into destination (C-contiguous NumPy arrays of one size) with cuweave's host copy "
      "threads, which fill staging buffers for large copies: several times one thread's speed on a big host.");
  m.def("pinned_empty", [](py::handle shape, py::handle dtype) { return pinned_array(shape, dtype, false); },
        py::arg("shape"), py::arg_v("dtype", py::module_::import("numpy").attr("float64"), "numpy.float64"),
        "A numpy.ndarray on pooled pinned memory (uninitialized).");
  m.def("pinned_zeros", [](py::handle shape, py::handle dtype) { return pinned_array(shape, dtype, true); },
        py::arg("shape"), py::arg_v("dtype", py::module_::import("numpy").attr("float64"), "numpy.float64"),
        "A numpy.ndarray on pooled pinned memory, zero-filled.");

  py::class_<HostRegistration, std::shared_ptr<HostRegistration>>(m, "HostRegistration", R"doc(
An existing array's memory, page-locked (cudaHostRegister) until release() or the end of the
``with`` block. Releasing waits for queued copies that use it.)doc")
      .def(py::init(made_elsewhere<HostRegistration>("HostRegistration", "cuweave.pinned(array) page-locks an array and returns one")))
      .def_property_readonly("active", &HostRegistration::active)
      .def_property_readonly("nbytes", &HostRegistration::size)
      .def("release", &HostRegistration::release, py::call_guard<ReleaseGil>())
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](HostRegistration& self, py::handle, py::handle, py::handle) {
             ReleaseGil release;
             self.release();
           });

  m.def(
      "register_host",
      [](py::handle object) {
        if (!py::isinstance<py::array>(object)) {
          throw WrongType(std::string("cuweave.pinned() needs a numpy.ndarray, not ") + Py_TYPE(object.ptr())->tp_name);
        }
        py::array array = py::reinterpret_borrow<py::array>(object);
        CUWEAVE_EXPECTS(array.flags() & py::array::c_style,
                        "cuweave.pinned() needs a C-contiguous array; pass numpy.ascontiguousarray(a)");
        CUWEAVE_EXPECTS(array.writeable(),
                        "cuweave.pinned() needs a writable array (read-only memory may not be page-lockable); "
                        "pass a writable copy");
        auto* data = const_cast<void*>(host_pointer(array));
        const auto bytes = static_cast<std::size_t>(array.nbytes());
        Hold owner = hold_python(array);
        ReleaseGil release;
        return HostRegistration::create(data, bytes, std::move(owner));
      },
      py::arg("array"));
  m.def(
      "is_pinned",
      [](py::handle object) {
        if (!py::isinstance<py::array>(object)) throw WrongType("is_pinned() needs a numpy.ndarray");
        py::array array = py::reinterpret_borrow<py::array>(object);
        if (array.nbytes() == 0) return false;
        return backend().memory().is_pinned(host_pointer(array));
      },
      py::arg("array"), "True if the array's memory is page-locked (pooled, registered or cudaHostAlloc'd).");
}

}  // namespace cuweave::bindings
