// Note [The device follows the stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CUDA checks the calling thread's *current* device as well as the stream on many stream-ordered calls. On two
// H200s, a host->device copy into device 1's pool memory on a stream of device 1 failed with
// cudaErrorInvalidValue while device 0 was current, and succeeded with device 1 current; allocations from a
// device's pool and its frees are the device's too. And a default stream's handle (legacy or per-thread)
// means the default stream of the *current* device: cw.default_stream(1) used while device 0 is current would
// otherwise queue work, an event record or a free on device 0's default stream, where a free could run before
// device 1's work on the memory had completed.
//
// So every stream-ordered call the core makes (copies, memsets, built-in and compiled kernels, allocations and
// frees, records, waits, host functions and flags, replays, captures, collectives, the staging ring's copies)
// is made inside a StreamDeviceScope: the stream's device is current for the call, and the caller's current
// device is current again afterwards. One mechanism, so that no call site can forget a device, and one place
// that makes it: the submission path (submission.hpp), whose queue() scopes every checked operation and whose
// on_device_of() and ordering_on_device_of() scope the calls that are no checked operation. Only submission.hpp
// includes this header.
//
// Records and waits are the hot paths' calls, and CUDA takes their device from the stream: on two H200s a
// record and a wait on a stream of device 1 ran with device 0 current (tests/python/test_device_rules.py).
// For them the scope is made with Needs::DefaultStreamHandle: it acts only for the default streams, whose
// handle means the current device's.
//
// Cost: a process that sees one device pays one comparison (several_devices() is false), since the only device
// is always current; with several, records and waits on streams of their own one more. Every other call, with
// several devices, pays one query of the current device (CUDA: cudaGetDevice, a thread-local read) and, where
// it differs, two cudaSetDevice calls.
#pragma once

#include "cuweave/backend.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

class StreamDeviceScope {
 public:
  // What makes the call need the stream's device current: everything (Always), or only a default stream's
  // handle (DefaultStreamHandle: records and waits, whose device CUDA takes from the stream otherwise).
  enum class Needs { Always, DefaultStreamHandle };

  explicit StreamDeviceScope(const Stream& stream, Needs needs = Needs::Always) {
    if (!several_devices()) return;
    if (needs == Needs::DefaultStreamHandle && stream.default_stream() == Stream::Default::None) {
      return;
    }
    make_current(stream.device());
  }
  StreamDeviceScope(const StreamDeviceScope&) = delete;
  StreamDeviceScope& operator=(const StreamDeviceScope&) = delete;
  ~StreamDeviceScope() {
    if (!changed_) return;
    try {
      backend().devices().set_current_device(previous_);
    } catch (...) {
      // Making current again a device that was current a moment ago fails only with a broken context, which
      // every later call reports.
    }
  }

 private:
  void make_current(int device) {
    previous_ = backend().devices().current_device();
    if (previous_ != device) {
      backend().devices().set_current_device(device);
      changed_ = true;
    }
  }

  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace cuweave
