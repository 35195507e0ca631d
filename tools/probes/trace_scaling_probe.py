"""Probe: does the cost of a traced record + wait grow with the number of operations in the trace?"""
import faulthandler
import sys
import time

import cuweave as cw

faulthandler.dump_traceback_later(150, exit=True)
a, b = cw.Stream(), cw.Stream()
event = cw.Event()
for n in (1000, 4000, 16000):
    with cw.trace() as t:
        start = time.perf_counter()
        for i in range(n):
            a.record(event)
            b.wait(event)
            if i % 2000 == 1999:
                print(f"  n={n} i={i + 1}: {(time.perf_counter() - start) / (i + 1) * 1e6:.2f} us/pair", flush=True)
        issued = time.perf_counter()
    closed = time.perf_counter()
    print(f"n={n}: issue {(issued - start) / n * 1e6:.2f} us/pair, close {closed - issued:.3f} s, "
          f"{len(t.events)} events, build {time.perf_counter() - closed:.3f} s", flush=True)
sys.exit(0)
