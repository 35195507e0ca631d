"""Probe: does reading an array on one stream wait for other streams' work (a spinning stream, the stream
that last used the array, a closed stream whose work is still queued)? Prints the seconds each read took;
1 s means it waited for the spin.

Seen on an H100 (2026-11-23, before the open-stream case was added): the two pageable copies 0.000 s, the
closed-stream case 1.000 s: a read on another stream of an array last used on a closed stream waited for it.
"""

import time

import numpy as np

import cuweave as cw


def timed(label, read):
    start = time.perf_counter()
    read()
    print(f"{label}: {time.perf_counter() - start:.3f} s")


a, b = cw.Stream(), cw.Stream()
d = cw.zeros(1024, np.float32, stream=b)
b.synchronize()

cw.ops.spin(1.0, stream=a)
timed("4 KB pageable to_numpy on b while a spins 1 s", lambda: d.to_numpy(stream=b))
a.synchronize()

cw.ops.spin(1.0, stream=a)
timed("4 KB pageable copy_async on b while a spins", lambda: cw.copy_async(np.empty(1024, np.float32), d, stream=b))
a.synchronize()

f = cw.zeros(1024, np.float32, stream=a)
a.synchronize()
cw.ops.spin(1.0, stream=a)
cw.ops.fill(f, 7.0, stream=a)
timed("to_numpy on b of an array last used on a (open, spinning)", lambda: f.to_numpy(stream=b))
a.synchronize()

c = cw.Stream()
e = cw.zeros(1024, np.float32, stream=c)
c.synchronize()
cw.ops.spin(1.0, stream=c)
cw.ops.fill(e, 7.0, stream=c)
c.close()
timed("to_numpy on b of an array last used on a closed, spinning stream", lambda: e.to_numpy(stream=b))
cw.synchronize()
