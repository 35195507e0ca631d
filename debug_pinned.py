# Bisects the pinned-pool reuse failure: runs test_pinned.py's tests in order, then the failing sequence.
import gc, sys, numpy as np, cuweave as cw
sys.path.insert(0, "tests/python")
import test_pinned as tp
names = [n for n in dir(tp) if n.startswith("test_")]
order = sorted(names, key=lambda n: getattr(tp, n).__code__.co_firstlineno)
skip = set(sys.argv[1:])
for n in order:
    if n in skip: continue
    fn = getattr(tp, n)
    args = {"stream": cw.Stream(), "rng": np.random.default_rng(1)}
    try: fn(**{k: args[k] for k in fn.__code__.co_varnames[:fn.__code__.co_argcount]})
    except Exception as e: print("test failed", n, e)
gc.collect(); cw.synchronize(); cw.collect(); gc.collect()
s = cw.Stream()
n = (4 << 20) + 123
st = lambda tag: print(tag, cw.pinned_pool().stats(), "pending", cw._core.pending_lifetimes())
st("start")
p = cw.pinned_empty(n, np.uint8); p[:] = 7
addr = p.ctypes.data
d = cw.empty(n, np.uint8, stream=s)
cw.ops.spin(0.3, stream=s)
t = cw.copy_async(d, p, stream=s)
st("after copy")
del p; gc.collect(); cw.collect(); st("after del+collect")
q = cw.pinned_empty(n, np.uint8); print("REUSED" if q.ctypes.data == addr else "ok", hex(addr), hex(q.ctypes.data)); st("after q")
s.synchronize()
