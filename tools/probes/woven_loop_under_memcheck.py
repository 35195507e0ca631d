"""Found: tests/python/test_weave_graphs.py's woven WHILE test fails under compute-sanitizer's memcheck now and then
(cudaErrorIllegalAddress or cudaErrorMisalignedAddress, mostly with no memcheck report), only when the capture is
woven AND holds a conditional node; without a tool it always runs right (H100, driver 580.159.04, 2026-11-27).
Cited by: tools/probes/conditional_nodes_under_compute_sanitizer.cu (variant W's header, with the counts), the
conditional_nodes marker (tests/conftest.py).

The test as a script, with one part taken away per variant:
  baseline      as the test (the sanitizer on, three woven streams, left = sum([3]), a WHILE loop on left > 0)
  no-sanitizer  without cw.sanitize()
  no-weave      the same operations on the capturing stream alone
  no-loop       the loop's three rounds unrolled (no conditional node)
  fill-left     left set by a fill instead of a sum (no graph-owned scratch)
  dot           the baseline, printing the captured graph

On the GPU machine, after building cuweave:
  for i in $(seq 96); do compute-sanitizer --tool memcheck --report-api-errors no \
      python3 tools/probes/woven_loop_under_memcheck.py baseline; done 2>&1 | grep -cE "^ok"
"""
import contextlib
import sys
import numpy as np
import cuweave as cw

variant = sys.argv[1]
N = 2048
stream = cw.Stream()
host = np.arange(N, dtype=np.float32)
x = cw.to_device(host, stream=stream)
p = cw.zeros(N, np.float32, stream=stream)
q = cw.zeros(N, np.float32, stream=stream)
left = cw.zeros((), np.int64, stream=stream)
three = cw.to_device(np.array([3], np.int64), stream=stream)
stream.synchronize()
sanitize = cw.sanitize() if variant != "no-sanitizer" else contextlib.nullcontext()
weave = cw.weave(streams=3) if variant != "no-weave" else contextlib.nullcontext()
with sanitize:
    with stream, cw.capture(stream) as cap, weave:
        cw.ops.scale(x, 2.0, out=p)
        cw.ops.add(x, 1.0, out=q)
        if variant == "no-loop":
            for _ in range(3):
                cw.ops.add(q, p, out=q)
        else:
            if variant == "fill-left":
                cw.ops.fill(left, 3)
            else:
                cw.ops.sum(three, out=left)
            with cw.while_loop(left, ">", 0):
                cw.ops.add(q, p, out=q)
                cw.ops.add(left, -1, out=left)
        r2 = cw.ops.add(q, 1.0)
        cw.ops.scale(p, 0.0, out=p)
    for _ in range(3):
        cap.graph.replay(stream)
    got = r2.to_numpy(stream=stream)
assert np.array_equal(got, host + 1 + 3 * 2 * host + 1), got[:4]
if variant == "dot":
    print(cap.graph.to_dot())
print("ok", variant)
