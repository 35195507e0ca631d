// Python callables run as host callbacks, and the errors they raise.
#pragma once

#include <functional>
#include <string>
#include "bindings/pybind.hpp"
#include "cuweave/hold.hpp"

namespace cuweave::bindings {

// A host callback calling function(*args) on cuweave's callback thread; an exception goes to the stream
// that launched or replayed it, whose synchronize() raises CallbackError (or, unreported, goes to
// sys.unraisablehook naming `context`). `api` names the caller in the TypeError for a non-callable.
std::function<void()> python_host_callback(py::handle function, py::args args, const char* api, const char* context);
// What traces call a Python callable's runs: its qualified name, else its repr.
std::string callable_name(py::handle function);
// Marks a stored error as reported and raises cuweave.CallbackError from it.
[[noreturn]] void raise_stored_callback_error(const Hold& error, const char* where);
// Waits for the work queued on `stream` with the GIL released, then raises CallbackError if a host callback
// on it raised (what Stream.synchronize() does; `where` names the call in that error).
void synchronize_stream(Stream& stream, const char* where);

}  // namespace cuweave::bindings
