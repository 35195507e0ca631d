import gc, numpy as np, cuweave as cw
s = cw.Stream()
n = (4 << 20) + 123
def st(tag): print(tag, cw.pinned_pool().stats(), "pending", cw._core.pending_lifetimes())
st("start")
p = cw.pinned_empty(n, np.uint8); p[:] = 7
addr = p.ctypes.data
d = cw.empty(n, np.uint8, stream=s)
cw.ops.spin(0.3, stream=s)
t = cw.copy_async(d, p, stream=s)
st("after copy"); print("query", s.query(), t.done)
del p; gc.collect(); st("after del")
cw.collect(); st("after collect")
q = cw.pinned_empty(n, np.uint8); print("same address:", q.ctypes.data == addr); st("after q")
s.synchronize(); st("after sync")
