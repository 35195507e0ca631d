"""A CuPy program with a race between two streams: `compute` reads `x` while `update` may still be writing it."""

import cupy as cp

x = cp.ones(1 << 27, dtype=cp.float32)
y = cp.empty_like(x)
update, compute = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)

with update:
    for _ in range(50):
        x *= 1.01
# compute.wait_event(update.record())   # the fix: the compute stream waits for the update
with compute:
    cp.multiply(x, 2.0, out=y)
print(float(y[0]))
