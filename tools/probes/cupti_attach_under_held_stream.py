"""Does entering a sanitize() block with CuPy imported wait for the GPU's queued work? The block subscribes to
CUPTI's callbacks (to watch CuPy's launches); a stream held by a HostLatch, released by a thread after HOLD_S,
shows whether that subscription waits for it: the first in the process, and a later one.

Found (one H200, CUDA 13.0): the first entry in a process took 3.009 s behind a 3 s hold, a later one 0.000 s; under
compute-sanitizer, which holds CUPTI (the subscription refused), 0.006 s.
"""

import threading
import time

import cupy  # noqa: F401 - imported, CuPy is watched in a sanitize() block
import numpy as np

import cuweave as cw

HOLD_S = 3.0


def entry_s_while_held() -> float:
    stream = cw.Stream()
    latch = cw.HostLatch(stream)
    cw.ops.fill(cw.zeros(4, np.float32), 1.0, stream=stream)  # queued behind the latch
    threading.Timer(HOLD_S, latch.release).start()
    start = time.perf_counter()
    with cw.sanitize():
        entered = time.perf_counter() - start
    stream.synchronize()
    return entered


print(f"a stream held {HOLD_S} s: first sanitize() entry took {entry_s_while_held():.3f} s, "
      f"a later one {entry_s_while_held():.3f} s")
