// Device arrays and NumPy arrays as operations take them: checked, placed, kept alive.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include "bindings/pybind.hpp"
#include "cuweave/hold.hpp"
#include "cuweave/operation.hpp"

namespace cuweave::bindings {

// Appends what work queued on `stream` that uses `array` must hold (Note [Memory follows its stream]);
// with a null stream (a graph node), the array's memory itself.
void add_uses(Holds& holds, DeviceArray& array, const std::shared_ptr<Stream>& stream);
// Whether an operation takes strided views (a copy does), or only contiguous arrays (a built-in kernel).
enum class Layouts { Contiguous, Strided };
// Throws unless `array` is on `stream`'s device, (when `written`) writable, and contiguous where `layouts` says.
void check_usable_on(const DeviceArray& array, const Stream& stream, bool written,
                     Layouts layouts = Layouts::Contiguous);
// check_usable_on for each of `operation`'s arrays.
void check_usable(const Operation& operation, const Stream& stream, Layouts layouts = Layouts::Contiguous);
// Places `operation` (Note [One operation, one path]) on the stream the user named (or None), then checks its
// arrays there. Inside a weave its reads of another device's arrays may become reads of copies: the caller takes
// its pointers from operation.standing_for() afterwards.
std::shared_ptr<Stream> placed(Operation& operation, py::handle stream_arg, Layouts layouts = Layouts::Contiguous);
// Checks a copy between two devices' contiguous arrays queued on `stream`, of one of the two devices, and enables
// peer access between them where the hardware allows (Note [Copies between devices]): "peer" (direct) or
// "through host".
const char* peer_copy_route(DeviceArray& dst, DeviceArray& src, const std::shared_ptr<Stream>& stream);
// A DeviceArray, or a zero-copy view of a foreign GPU array (__cuda_array_interface__ or DLPack).
std::shared_ptr<DeviceArray> as_device_array(py::handle object);
// The holder inside an instance of exactly the class `info` describes, read without a caster (whose type
// lookups cost more than most hot calls' own work); null for anything else (subclasses, foreign objects, an
// instance whose __init__ has not run), which the caller hands to the general path. The holder lives in the
// Python object, which the caller's reference keeps alive.
template <typename T>
const std::shared_ptr<T>* exact_holder(PyObject* object, const py::detail::type_info* info) {
  if (info == nullptr || Py_TYPE(object) != info->type) return nullptr;
  auto* instance = reinterpret_cast<py::detail::instance*>(object);
  if (instance->simple_layout) {
    // One class, holder inline: where pybind11's value_and_holder finds it (vh[1]), without its out-of-line call.
    if (!instance->simple_holder_constructed) return nullptr;
    return std::launder(reinterpret_cast<const std::shared_ptr<T>*>(&instance->simple_value_holder[1]));
  }
  py::detail::value_and_holder held = instance->get_value_and_holder(info, /*throw_if_missing=*/false);
  if (!held || !held.holder_constructed()) return nullptr;
  return &held.template holder<std::shared_ptr<T>>();
}
// exact_holder of a cuweave.DeviceArray; as_device_array handles everything else.
const std::shared_ptr<DeviceArray>* exact_device_array(PyObject* object);
// True for device arrays of any library (cuweave, __cuda_array_interface__, DLPack other than NumPy).
bool is_device_side(py::handle object);
// A C-contiguous NumPy array for a host side of a copy (TypeError/ValueError naming the problem).
py::array host_array(py::handle object, bool destination);
std::vector<std::int64_t> shape_of(const py::array& array);
std::string typestr_of(const py::array& array);
// What a copy of a host array must keep alive: the array (which owns any pinned block) and its registration.
Holds host_holds(const py::array& array);

}  // namespace cuweave::bindings
