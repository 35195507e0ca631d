// cuweave._core: the private compiled module. Python code imports it through the cuweave package.
#include "bindings/gil.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/services.hpp"

PYBIND11_MODULE(_core, m) {
  namespace b = cuweave::bindings;
  m.doc() = "cuweave's compiled core (private: import cuweave instead)";
  b::bind_errors(m);
  b::bind_backend(m);
  b::bind_device(m);
  b::bind_partition(m);
  b::bind_stream(m);
  b::bind_event(m);
  b::bind_host_latch(m);
  b::bind_sanitizer(m);
  b::bind_pinned(m);
  b::bind_array(m);
  b::bind_array_views(m);
  b::bind_copy(m);
  b::bind_ops(m);
  b::bind_trace(m);
  b::bind_kernel(m);
  b::bind_graph(m);
  b::bind_graph_function(m);
  b::bind_conditional(m);
  b::bind_collectives(m);
  b::bind_weave(m);
  b::bind_hook_table(m);  // after the weave and the sanitizer it hands out
  b::bind_backend_calls(m);  // after the classes its functions take (Stream, Event)
  b::bind_misfit_overloads(m);  // after the functions it adds a catch-all to
  b::bind_method_misfits(m);  // after every class's methods
  b::install_fast_methods(m);  // after the classes it speeds up
  m.def("_shutdown",
        [] {
          cuweave::LoadedModule::leave_loaded_from_now();  // kernels freed during finalization start no thread
          b::ReleaseGil release;  // a running callback may need the GIL to return
          cuweave::services().host_callbacks().shutdown(std::chrono::seconds(10));
          cuweave::paused_streams::shutdown(std::chrono::seconds(10));
        },
        "Stops the host-callback thread, letting a running callback return first, then lets the releases it "
        "handed over run (registered with atexit).");
}
