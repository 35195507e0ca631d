// Streams named from Python: None, a cuweave Stream, or another library's stream.
#pragma once

#include <cstdint>
#include <memory>
#include "bindings/pybind.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

// The holder inside a cuweave.Stream (exactly that class), read without a caster (exact_holder); null for
// anything else, which resolve_stream handles.
const std::shared_ptr<Stream>* exact_stream(PyObject* object);
// `None` -> this thread's current stream; a cuweave Stream; or any object speaking __cuda_stream__.
std::shared_ptr<Stream> resolve_stream(py::handle stream);
// The stream a `stream=` argument names: null for None (the weave's choice, or the current stream: see
// cuweave::place), else as resolve_stream.
std::shared_ptr<Stream> named_stream(py::handle stream);
// A cuweave Stream for `object`: a Stream, anything with __cuda_stream__, a torch or cupy stream, or
// (only with allow_raw_handle, since a wrong integer crashes the driver) an int handle.
std::shared_ptr<Stream> adopt_foreign_stream(py::handle object, bool allow_raw_handle = false);

// The value a CUDA-stream field of a protocol carries for `stream` (1 legacy, 2 per-thread, else the handle).
std::uintptr_t protocol_stream_value(const Stream& stream);

}  // namespace cuweave::bindings
