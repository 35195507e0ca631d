"""A child process for test_context_lost.py: a kernel writes through a wild pointer, which poisons the CUDA
context; every later failing call must say so plainly, naming the first failure, and the process must
still exit cleanly. Prints one line per observation."""

from __future__ import annotations

import numpy as np

import cuweave as cw

WILD_WRITE = r"""
extern "C" __global__ void wild_write(int* nowhere) { *nowhere = 1; }
"""

kept = cw.to_device(np.arange(16, dtype=np.float32))  # alive across the failure and at exit
stream = cw.Stream()
kernel = cw.compile(WILD_WRITE, "wild_write")
kernel(1, 1, (np.uint64(0x10),), stream=stream)
try:
    stream.synchronize()
except cw.ContextLostError as error:
    print(f"first {error.name} {error.call} {error.first_name} {error.first_call}")
    print(f"message {error}")
for attempt in ("to_device", "synchronize", "record"):
    try:
        if attempt == "to_device":
            cw.to_device(np.ones(4, np.float32)).to_numpy()
        elif attempt == "synchronize":
            cw.synchronize()
        else:
            cw.Stream().record().synchronize()
        print(f"later {attempt} succeeded")
    except cw.ContextLostError as error:
        print(f"later {attempt} {error.first_name} {error.first_call}")
    except Exception as error:  # noqa: BLE001 - any other type is the failure under test
        print(f"later {attempt} raised {type(error).__name__}: {error}")
print("exiting", flush=True)
