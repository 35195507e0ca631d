// How a backend observes what ran, for traces (Note [Tracing] in trace.hpp, Note [Backend facets] in
// backend.hpp).
#pragma once

#include <cstdint>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

class Tracer {
 public:
  virtual ~Tracer() = default;
  // Collection on and off: the core calls start() when the first trace opens and stop() after the last
  // one closed. start() throws, naming what is missing, where the backend cannot trace.
  virtual void start() = 0;
  virtual void stop() noexcept = 0;
  // Hands everything that has completed so far to trace::deliver().
  virtual void flush() = 0;
  // Now, on the clock activities are stamped with (ns).
  virtual std::uint64_t now_ns() = 0;
  // The id activities on `stream` carry (for the per-thread default stream: the calling thread's own).
  virtual std::uint64_t stream_id(StreamHandle stream, int device) = 0;
};

}  // namespace cuweave
