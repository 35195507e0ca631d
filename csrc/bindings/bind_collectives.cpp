// Collectives among GPUs (Note [Collectives] in collective.hpp): communicators, their operations on device
// arrays of any library, and groups. The Python layer (cuweave/collectives.py) adds the list form for the
// communicators of one process.
#include <functional>

#include "bindings/arrays.hpp"
#include "bindings/devices.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/communicator.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

ElementType element_type(const DeviceArray& array) {
  const std::string& t = array.dtype().typestr;
  if (t == "|i1") return ElementType::Int8;
  if (t == "|u1") return ElementType::Uint8;
  if (t == "<i4") return ElementType::Int32;
  if (t == "<u4") return ElementType::Uint32;
  if (t == "<i8") return ElementType::Int64;
  if (t == "<u8") return ElementType::Uint64;
  if (t == "<f2") return ElementType::Float16;
  if (t == "<f4") return ElementType::Float32;
  if (t == "<f8") return ElementType::Float64;
  throw WrongType("collectives work on int8, uint8, int32, uint32, int64, uint64, float16, float32 and float64 "
                  "arrays, not " +
                  py::str(dtype_to_python(array.dtype())).cast<std::string>());
}

ReduceOp reduce_op(const std::string& name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "prod") return ReduceOp::Product;
  if (name == "max") return ReduceOp::Max;
  if (name == "min") return ReduceOp::Min;
  if (name == "avg") return ReduceOp::Average;
  throw InvalidArgument("op must be \"sum\", \"prod\", \"max\", \"min\" or \"avg\", not \"" + name + "\"");
}

// The output a collective writes: `out` when given (same dtype as `like`, `count` elements), else null.
std::shared_ptr<DeviceArray> given_output(py::handle out, const DeviceArray& like, std::size_t count,
                                          const char* what) {
  if (out.is_none()) return nullptr;
  auto array = as_device_array(out);
  if (array->dtype().typestr != like.dtype().typestr) {
    throw WrongType(std::string(what) + ": out has dtype " +
                    py::str(dtype_to_python(array->dtype())).cast<std::string>() + ", the input " +
                    py::str(dtype_to_python(like.dtype())).cast<std::string>() + "; collectives never convert");
  }
  if (array->size() != count) {
    throw InvalidArgument(std::string(what) + ": out must hold " + std::to_string(count) + " elements, not " +
                          std::to_string(array->size()));
  }
  return array;
}

// A new output of `shape` and `like`'s dtype, made on the stream the collective is placed on.
auto new_output(std::vector<std::int64_t> shape, const DeviceArray& like) {
  return [shape = std::move(shape), dtype = like.dtype()](const std::shared_ptr<Stream>& stream) {
    return DeviceArray::allocate(shape, dtype, stream);
  };
}

// Queues `collective` of `communicator`, `send` read and `recv` written (either may be null), on the stream
// the user named (None: Communicator::place's choice). A null `recv` with `make_recv` is made on the stream
// placed (an output the collective writes whole). Returns `recv`.
std::shared_ptr<DeviceArray> run(
    Communicator& communicator, Collective collective, const std::shared_ptr<DeviceArray>& send,
    std::shared_ptr<DeviceArray> recv, py::handle stream_arg,
    const std::function<std::shared_ptr<DeviceArray>(const std::shared_ptr<Stream>&)>& make_recv = nullptr) {
  Operation operation(operation_name(collective.kind));
  communicator.describe_operation(operation, collective, send, recv);
  std::shared_ptr<Stream> stream =
      communicator.place(operation, stream_arg.is_none() ? nullptr : resolve_stream(stream_arg));
  if (!recv && make_recv) {
    recv = make_recv(stream);
    operation.writes(recv);
  }
  communicator.check_stream(collective, *stream);  // before the arrays: the stream is the likelier mistake
  if (send) {
    check_usable_on(*send, *stream, false);
    collective.send = send->data();
  }
  if (recv) {
    check_usable_on(*recv, *stream, true);
    collective.recv = recv->data();
  }
  // NCCL ignores the send buffer of a broadcast and the receive buffer of a reduce except on the root, but
  // checks them for null: elsewhere they point at the buffer this rank has.
  if (!collective.send) collective.send = collective.recv;
  if (!collective.recv && collective.kind == CollectiveKind::Reduce) collective.recv = const_cast<void*>(collective.send);
  {
    ReleaseGil unblocked;  // NCCL may wait for the other ranks (the first collective sets up the connections)
    communicator.enqueue(collective, operation, stream);
  }
  return recv;
}

Collective make(CollectiveKind kind, const DeviceArray& x, std::size_t count, int root = 0,
                ReduceOp op = ReduceOp::Sum) {
  Collective collective;
  collective.kind = kind;
  collective.count = count;
  collective.type = element_type(x);
  collective.op = op;
  collective.root = root;
  return collective;
}

// A communicator's timeout from Python: seconds (a number), or None for the default.
CollectiveTimeout timeout_of(py::handle timeout) {
  if (timeout.is_none()) return Communicator::default_timeout();
  if (!py::isinstance<py::float_>(timeout) && !py::isinstance<py::int_>(timeout)) {
    throw WrongType("timeout is a number of seconds (or None for the default), not " +
                    py::str(py::type::of(timeout).attr("__name__")).cast<std::string>());
  }
  return CollectiveTimeout(timeout.cast<double>());
}

// A Python context manager for CollectiveGroup (one thread; nestable).
class GroupScope {
 public:
  void enter() {
    if (group_) throw InvalidArgument("this collectives.group() is already open; make a new one to nest");
    group_ = std::make_unique<CollectiveGroup>();
  }
  void exit(py::handle exception) {
    std::unique_ptr<CollectiveGroup> group = std::move(group_);
    if (!group || !exception.is_none()) return;  // an exception on the way out: the group ends quietly
    ReleaseGil unblocked;
    group->end();  // its error is the caller's
  }

 private:
  std::unique_ptr<CollectiveGroup> group_;
};

}  // namespace

namespace {
const CallShape kCommunicatorCall{"Communicator()",
                                  "Communicator(unique_id, *, ranks, rank, device=None, timeout=None)",
                                  {{"world_size", "ranks=", "torch.distributed's"}}};
}  // namespace

void bind_collectives(py::module_& m) {
  m.def(
      "abort_unfinished_collectives",
      [] {
        ReleaseGil unblocked;
        Communicator::abort_unfinished("the process is exiting");
      },
      "Aborts every communicator with unfinished collectives (run at exit: a collective waiting for a rank that "
      "never comes would keep the process from ending).");
  m.def(
      "collective_unique_id",
      [] { return py::bytes(Communicator::new_id()); },
      "A new id for the ranks of one communicator (bytes): make it on one process and pass it to the others.");
  m.def(
      "collective_timeout_s", [](py::handle timeout) { return timeout_of(timeout).count(); },
      py::arg("timeout") = py::none(),
      "The seconds a communicator made with `timeout` waits (None: CUWEAVE_COLLECTIVE_TIMEOUT_S, else 600).");

  py::class_<GroupScope>(m, "CollectiveGroup", "See cuweave.collectives.group().")
      .def(py::init<>())
      .def("__enter__", [](GroupScope& scope) -> GroupScope& { scope.enter(); return scope; },
           py::return_value_policy::reference_internal)
      .def("__exit__", [](GroupScope& scope, py::handle type, py::handle, py::handle) { scope.exit(type); });

  py::class_<Communicator, std::shared_ptr<Communicator>>(m, "Communicator", R"doc(
One rank of a group of GPUs that run collectives together, through NCCL on a GPU (the simulator's
rendezvous otherwise). Every rank calls the same collectives in the same order, each on a stream of its own
device; a collective completes on a rank's stream once every rank's stream has reached it.

Make one per process with ``Communicator(unique_id, ranks=, rank=, device=)`` (the id from
``cuweave.collectives.unique_id()`` on one process, passed to the others), or all of one process's at once
with ``cuweave.collectives.communicators(devices)``. Operations take device arrays of any library
(``__cuda_array_interface__``, DLPack) and ``stream=`` (default: the current stream when it is on the
communicator's device, else that device's default stream); the arrays stay alive until the collective has
completed.)doc")
      .def(py::init([](py::bytes id, py::handle ranks, py::handle rank, py::handle device, py::handle timeout) {
             const int count = whole_number(ranks, "Communicator()", "ranks");
             const int index = whole_number(rank, "Communicator()", "rank");
             const int ordinal = resolve_device(device);
             const CollectiveTimeout seconds = timeout_of(timeout);
             const std::string bytes = id;
             ReleaseGil unblocked;  // waits for every rank to join
             return Communicator::join(bytes, count, index, ordinal, seconds);
           }),
           py::arg("unique_id"), py::kw_only(), py::arg("ranks"), py::arg("rank"), py::arg("device") = py::none(),
           py::arg("timeout") = py::none(),
           "Joins rank `rank` of `ranks` on `device` (default: the current device); returns once all have joined. "
           "timeout: seconds that joining and each collective may take (default: CUWEAVE_COLLECTIVE_TIMEOUT_S, else "
           "600); past it NcclError (name \"ncclTimeout\") is raised and the communicator aborted.")
      .def(py::init(misfit_init<Communicator>(kCommunicatorCall)))
      .def_static(
          "for_devices",
          [](const std::vector<py::object>& devices, py::handle timeout) {
            std::vector<int> ordinals;
            for (const py::object& device : devices) ordinals.push_back(resolve_device(device));
            const CollectiveTimeout seconds = timeout_of(timeout);
            ReleaseGil unblocked;
            return Communicator::for_devices(ordinals, seconds);
          },
          py::arg("devices"), py::kw_only(), py::arg("timeout") = py::none(),
          "One communicator per device, ranks in the order given (one process); timeout as for Communicator().")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("ranks", &Communicator::ranks)
      .def_property_readonly("device", &Communicator::device)
      .def_property_readonly("timeout", [](const Communicator& c) { return c.timeout().count(); },
                             "Seconds that joining and each collective may take before the communicator is aborted.")
      .def_property_readonly("closed", &Communicator::closed)
      .def_property_readonly(
          "failure",
          [](const Communicator& c) -> py::object {
            const auto failure = c.failure();
            return failure ? py::object(py::str(failure->what())) : py::object(py::none());
          },
          "Why the communicator was aborted (a timeout, NCCL's error, abort()), or None while it works.")
      .def("close", &Communicator::close,
           "Refuses later collectives; NCCL's communicator is destroyed once the queued ones have completed.")
      .def(
          "abort",
          [](Communicator& c) {
            ReleaseGil unblocked;
            c.abort("Communicator.abort()");
          },
          "Aborts NCCL's communicator now (ncclCommAbort): its unfinished collectives end without their results (the "
          "waits for them raise NcclError), later ones are refused, and the other ranks' waits for this one fail "
          "instead of running into their timeout.")
      .def("__enter__", [](const std::shared_ptr<Communicator>& c) { return c; })
      .def("__exit__",
           [](Communicator& c, py::handle type, py::handle, py::handle) {
             if (type.is_none()) {
               c.close();
               return;
             }
             // Leaving by an exception: the other ranks must not wait for this one until their timeout.
             ReleaseGil unblocked;
             c.abort("its rank left the with-block by an exception");
           })
      .def("__repr__",
           [](const Communicator& c) {
             return "<cuweave.collectives.Communicator rank " + std::to_string(c.rank()) + " of " +
                    std::to_string(c.ranks()) + " on device " + std::to_string(c.device()) +
                    (c.failure() ? ", aborted>" : c.closed() ? ", closed>" : ">");
           })
      .def(
          "all_reduce",
          [](Communicator& c, py::handle x_arg, py::handle out_arg, const std::string& op, py::handle stream_arg) {
            auto x = as_device_array(x_arg);
            auto out = out_arg.is_none() ? x : given_output(out_arg, *x, x->size(), "all_reduce");
            return run(c, make(CollectiveKind::AllReduce, *x, x->size(), 0, reduce_op(op)), x, out, stream_arg);
          },
          py::arg("x"), py::kw_only(), py::arg("out") = py::none(), py::arg("op") = "sum",
          py::arg("stream") = py::none(),
          "out = op over ranks of x (in place when out is None); op: \"sum\", \"prod\", \"max\", \"min\", \"avg\". "
          "Returns out.")
      .def(
          "broadcast",
          [](Communicator& c, py::handle x_arg, int root, py::handle out_arg, py::handle stream_arg) {
            auto x = as_device_array(x_arg);
            auto out = out_arg.is_none() ? x : given_output(out_arg, *x, x->size(), "broadcast");
            return run(c, make(CollectiveKind::Broadcast, *x, x->size(), root), c.rank() == root ? x : nullptr, out,
                       stream_arg);
          },
          py::arg("x"), py::kw_only(), py::arg("root") = 0, py::arg("out") = py::none(), py::arg("stream") = py::none(),
          "out = the root's x on every rank (in place when out is None). Returns out.")
      .def(
          "reduce",
          [](Communicator& c, py::handle x_arg, int root, py::handle out_arg, const std::string& op,
             py::handle stream_arg) -> py::object {
            auto x = as_device_array(x_arg);
            const bool at_root = c.rank() == root;
            auto out = !at_root || out_arg.is_none() ? x : given_output(out_arg, *x, x->size(), "reduce");
            run(c, make(CollectiveKind::Reduce, *x, x->size(), root, reduce_op(op)), x, at_root ? out : nullptr,
                stream_arg);
            if (!at_root) return py::none();
            return py::cast(out);
          },
          py::arg("x"), py::kw_only(), py::arg("root") = 0, py::arg("out") = py::none(), py::arg("op") = "sum",
          py::arg("stream") = py::none(),
          "On the root, out = op over ranks of x (in place when out is None), returned; None on the other ranks.")
      .def(
          "all_gather",
          [](Communicator& c, py::handle x_arg, py::handle out_arg, py::handle stream_arg) {
            auto x = as_device_array(x_arg);
            std::vector<std::int64_t> shape{c.ranks()};
            shape.insert(shape.end(), x->shape().begin(), x->shape().end());
            auto out = given_output(out_arg, *x, x->size() * static_cast<std::size_t>(c.ranks()), "all_gather");
            return run(c, make(CollectiveKind::AllGather, *x, x->size()), x, out, stream_arg,
                       new_output(std::move(shape), *x));
          },
          py::arg("x"), py::kw_only(), py::arg("out") = py::none(), py::arg("stream") = py::none(),
          "out[r] = rank r's x, on every rank; out has shape ``(ranks, *x.shape)`` (or any shape of that size). "
          "Returns out.")
      .def(
          "reduce_scatter",
          [](Communicator& c, py::handle x_arg, py::handle out_arg, const std::string& op, py::handle stream_arg) {
            auto x = as_device_array(x_arg);
            if (x->shape().empty() || x->shape()[0] % c.ranks() != 0) {
              throw InvalidArgument("reduce_scatter splits x's first axis among the " + std::to_string(c.ranks()) +
                                    " ranks; its length must be a multiple of " + std::to_string(c.ranks()));
            }
            std::vector<std::int64_t> shape = x->shape();
            shape[0] /= c.ranks();
            const std::size_t count = x->size() / static_cast<std::size_t>(c.ranks());
            auto out = given_output(out_arg, *x, count, "reduce_scatter");
            return run(c, make(CollectiveKind::ReduceScatter, *x, count, 0, reduce_op(op)), x, out, stream_arg,
                       new_output(std::move(shape), *x));
          },
          py::arg("x"), py::kw_only(), py::arg("out") = py::none(), py::arg("op") = "sum",
          py::arg("stream") = py::none(),
          "out = op over ranks of this rank's share of x (x split along its first axis, rank r taking part r). "
          "Returns out.")
      .def(
          "send",
          [](Communicator& c, py::handle x_arg, int peer, py::handle stream_arg) {
            auto x = as_device_array(x_arg);
            run(c, make(CollectiveKind::Send, *x, x->size(), peer), x, nullptr, stream_arg);
          },
          py::arg("x"), py::kw_only(), py::arg("peer"), py::arg("stream") = py::none(),
          "Sends x to rank `peer`, which receives it with recv (in order per pair of ranks).")
      .def(
          "recv",
          [](Communicator& c, py::handle x_arg, int peer, py::handle stream_arg) {
            auto x = as_device_array(x_arg);
            return run(c, make(CollectiveKind::Recv, *x, x->size(), peer), nullptr, x, stream_arg);
          },
          py::arg("x"), py::kw_only(), py::arg("peer"), py::arg("stream") = py::none(),
          "Receives into x what rank `peer` sends; returns x.");
}

}  // namespace cuweave::bindings
