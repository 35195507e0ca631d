// The GIL around calls that block or queue work.
#pragma once

#include <optional>
#include "bindings/pybind.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::bindings {

// Releases the GIL around a call that may block. While a trace is open it first notes the Python call
// site, which operations issued without the GIL cannot read (Note [Tracing]). Use it wherever a binding
// releases the GIL, also as py::call_guard<ReleaseGil>.
struct ReleaseGil {
  trace::CallSiteNote note;
  py::gil_scoped_release release;
};

// Around a call that queues work on a stream: releases the GIL while a stream is paused for the host, whose
// queue may be full (Note [Enqueueing behind a paused stream]); otherwise keeps it, at the cost of one
// relaxed atomic load. The enclosed code must not touch Python objects.
class UnblockedEnqueue {
 public:
  UnblockedEnqueue() {
    if (paused_streams::any()) {
      note_.emplace();
      state_ = PyEval_SaveThread();
    }
  }
  UnblockedEnqueue(const UnblockedEnqueue&) = delete;
  UnblockedEnqueue& operator=(const UnblockedEnqueue&) = delete;
  ~UnblockedEnqueue() {
    if (state_) PyEval_RestoreThread(state_);
  }

 private:
  std::optional<trace::CallSiteNote> note_;
  PyThreadState* state_ = nullptr;
};

}  // namespace cuweave::bindings
