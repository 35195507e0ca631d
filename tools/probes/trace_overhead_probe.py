import time, numpy as np, cuweave as cw
a, b = cw.Stream(), cw.Stream()
ev = cw.Event()
x = cw.to_device(np.ones(1, np.float32), stream=a)
def per_call(fn, n):
    fn(); a.synchronize()
    t = time.perf_counter()
    for _ in range(n): fn()
    dt = (time.perf_counter() - t) / n * 1e6
    a.synchronize(); b.synchronize()
    return dt
ops = {
  "record": lambda: a.record(ev),
  "wait": lambda: b.wait(ev),
  "record+wait": lambda: (a.record(ev), b.wait(ev)),
  "add kernel": lambda: cw.ops.add(x, 1.0, out=x, stream=a),
}
def table(label, n):
    print(label, {k: round(min(per_call(f, n) for _ in range(3)), 3) for k, f in ops.items()}, flush=True)
table("before any trace", 20000)
with cw.trace() as t:
    table("traced", 300)
print(t, flush=True)
table("after trace", 20000)
