"""Probe: copying from an array last used on a closed stream held by a stream-ordered callback, with and
without the stream-race sanitizer, printing a marker before each step (where a crash happens)."""

import sys
import threading

import numpy as np

import cuweave as cw

variant = sys.argv[1]
opened = threading.Event()
closing = cw.Stream()
reader = cw.Stream()
data = cw.zeros(1024, np.float32, stream=closing)
closing.synchronize()
if variant.startswith("latch"):
    latch = cw.HostLatch(closing)
else:
    closing.launch_host_func(lambda: opened.wait(30), ordered=True)
print("held", flush=True)
cw.ops.fill(data, 7.0, stream=closing)
done = closing.record()
if not variant.endswith("open"):
    closing.close()
print("closed", flush=True)
sanitized = "sanitize" in variant
if sanitized:
    cw.sanitize(on_race="ignore").__enter__()
print("sanitizer on" if sanitized else "sanitizer off", flush=True)
pinned = cw.pinned_empty(1024, np.float32)
print("pinned", flush=True)
cw.copy_async(pinned, data, stream=reader)
print("copied", flush=True)
opened.set()
if variant.startswith("latch"):
    latch.release()
done.synchronize()
print("result", data.to_numpy(stream=reader)[:2], flush=True)
