"""CUDA's rules for several devices, and the simulator keeping each of them (Note [Simulated device access]).

Each row of RULES is one call made the way CUDA makes it (cuweave._core.backend_calls: raw pointers, none of
cuweave's checks, and no StreamDeviceScope, so the current device is whatever the row sets), with what CUDA
returned for it on two GPUs (the first column of the issue's probes on two H200s with NV18 NVLink; the CUDA
backend's run of this file on two GPUs checks every row). The rows run in a fresh process each time: peer access, once enabled, stays for the process, and a
fault loses the device's context for good. On a machine with two GPUs the table is checked on both backends;
without, on the simulator (CI: CUWEAVE_SIM_DEVICES=3).

The rules are why cuweave makes each stream's device current for every stream-ordered call (Note [The device
follows the stream]) and grants pools where it enables peer access (Backend::enable_peer_access).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import cuweave as cw
from _support import skip_under_compute_sanitizer

pytestmark = pytest.mark.skipif(
    cw.device_count() < 2, reason="needs two devices (CUWEAVE_SIM_DEVICES=2 on the simulator)"
)

OK = "ok"
INVALID_VALUE = "cudaErrorInvalidValue"
INVALID_HANDLE = "cudaErrorInvalidResourceHandle"
ILLEGAL_ADDRESS = "cudaErrorIllegalAddress"

# (rule, what CUDA returned on two H200s). The code of each row is in ROWS below, under the same name, in
# the order the rows run: those that need no access granted come before the row that enables peer access.
RULES = {
    "host->device copy into device 1's pool memory, stream of device 1, device 0 current": INVALID_VALUE,
    "the same copy with device 1 current": OK,
    "device->host copy from device 1's pool memory, stream of device 1, device 0 current": INVALID_VALUE,
    "host->device copy into device 1's cudaMalloc memory, stream of device 1, device 0 current": OK,
    "device 0 -> device 1 copy of pool memory by cudaMemcpyAsync, stream and current device 1, no access": INVALID_VALUE,
    "the same copy on a stream of device 0 with device 0 current": INVALID_VALUE,
    "device 0 -> device 1 copy of pool memory by cudaMemcpyPeerAsync, no access": OK,
    "device 0 -> device 1 copy of cudaMalloc memory by cudaMemcpyAsync, no peer access": OK,
    "a device-0 event recorded on a stream of device 1 (device 1 current)": INVALID_HANDLE,
    "a stream of device 1 waits for an event of device 0": OK,
    "a kernel on a stream of device 1 while device 0 is current": OK,
    "after peer access and pool grants: device 0 -> device 1 copy of pool memory by cudaMemcpyAsync": OK,
    "after peer access and pool grants: a kernel on device 1 writes device 0's pool memory": OK,
}
# A fault loses the context: in a process of its own.
FAULT_RULE = "a kernel on device 1 writes device 0's pool memory without access: the next synchronize"
FAULT_AFTER_RULE = "then any call on device 1"
FAULT_RULES = {FAULT_RULE: ILLEGAL_ADDRESS, FAULT_AFTER_RULE: ILLEGAL_ADDRESS}

# Runs in a fresh process: prints {rule: "ok" or the CUDA error name}.
ROWS = r'''
import json, numpy as np, cuweave as cw
from cuweave._core import backend_calls as raw

N = 4096
results = {}
s0, s1 = cw.Stream(device=0), cw.Stream(device=1)
host = cw.pinned_empty(N, np.uint8)
host[:] = 7

def row(rule, call):
    try:
        call()
        results[rule] = "ok"
    except cw.CudaError as error:
        results[rule] = error.name

def on(device, call):
    with cw.Device(device):
        call()

pool0 = raw.allocate(N, 0, s0)
pool1 = raw.allocate(N, 1, s1)
plain0 = raw.allocate_unpooled(N, 0)
plain1 = raw.allocate_unpooled(N, 1)
s0.synchronize(); s1.synchronize()
address = host.ctypes.data

def copy_and_wait(destination, source, stream):
    raw.copy(destination, source, N, stream)
    raw.synchronize(stream)

row("host->device copy into device 1's pool memory, stream of device 1, device 0 current",
    lambda: on(0, lambda: copy_and_wait(pool1, address, s1)))
row("the same copy with device 1 current", lambda: on(1, lambda: copy_and_wait(pool1, address, s1)))
row("device->host copy from device 1's pool memory, stream of device 1, device 0 current",
    lambda: on(0, lambda: copy_and_wait(address, pool1, s1)))
row("host->device copy into device 1's cudaMalloc memory, stream of device 1, device 0 current",
    lambda: on(0, lambda: copy_and_wait(plain1, address, s1)))
row("device 0 -> device 1 copy of pool memory by cudaMemcpyAsync, stream and current device 1, no access",
    lambda: on(1, lambda: copy_and_wait(pool1, pool0, s1)))
row("the same copy on a stream of device 0 with device 0 current", lambda: on(0, lambda: copy_and_wait(pool1, pool0, s0)))

def peer_copy():
    raw.copy_between_devices(pool1, 1, pool0, 0, N, s1)
    raw.synchronize(s1)

row("device 0 -> device 1 copy of pool memory by cudaMemcpyPeerAsync, no access", lambda: on(1, peer_copy))
row("device 0 -> device 1 copy of cudaMalloc memory by cudaMemcpyAsync, no peer access",
    lambda: on(1, lambda: copy_and_wait(plain1, plain0, s1)))
event0 = cw.Event(device=0)
row("a device-0 event recorded on a stream of device 1 (device 1 current)", lambda: on(1, lambda: raw.record(event0, s1)))

def wait_across():
    raw.record(event0, s0)
    raw.wait(s1, event0)
    raw.synchronize(s1)

row("a stream of device 1 waits for an event of device 0", lambda: on(1, wait_across))

def kernel_on_1():
    raw.fill_bytes(pool1, N, 3, s1)
    raw.synchronize(s1)

row("a kernel on a stream of device 1 while device 0 is current", lambda: on(0, kernel_on_1))

if raw.enable_peer_access(0, 1):
    row("after peer access and pool grants: device 0 -> device 1 copy of pool memory by cudaMemcpyAsync",
        lambda: on(1, lambda: copy_and_wait(pool1, pool0, s1)))

    def kernel_on_peer():
        raw.fill_bytes(pool0, N, 5, s1)
        raw.synchronize(s1)

    row("after peer access and pool grants: a kernel on device 1 writes device 0's pool memory",
        lambda: on(1, kernel_on_peer))
print(json.dumps(results))
'''

FAULT = r'''
import json, numpy as np, cuweave as cw
from cuweave._core import backend_calls as raw

results = {}
s0, s1 = cw.Stream(device=0), cw.Stream(device=1)
pool0 = raw.allocate(4096, 0, s0)
s0.synchronize()
with cw.Device(1):
    raw.fill_bytes(pool0, 4096, 1, s1)  # device 0's pool memory, never granted to device 1
    for rule, call in [(%r, lambda: raw.synchronize(s1)), (%r, lambda: cw.Stream(device=1).synchronize())]:
        try:
            call()
            results[rule] = "ok"
        except cw.ContextLostError as error:
            results[rule] = error.name
print(json.dumps(results))
''' % (FAULT_RULE, FAULT_AFTER_RULE)


def run_rows(program: str, backend: str) -> dict:
    env = dict(os.environ, CUWEAVE_BACKEND=backend)
    if backend == "sim":
        env.setdefault("CUWEAVE_SIM_DEVICES", "2")
    env.pop("CUWEAVE_SANITIZE", None)  # raw calls bypass what the stream-race sanitizer is shown
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


BACKENDS = ["sim"] + (["cuda"] if cw.backend() == "cuda" else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_rule_gives_what_cuda_gave(backend):
    results = run_rows(ROWS, backend)
    expected = dict(RULES)
    if not any(rule.startswith("after peer access") for rule in results):  # the devices have no peer link
        expected = {rule: result for rule, result in RULES.items() if not rule.startswith("after peer access")}
    assert results == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_touching_memory_its_device_cannot_reach_loses_the_context(backend):
    if backend == "cuda":
        skip_under_compute_sanitizer("writes out of bounds on purpose: memcheck reports it and ends the kernel "
                                     "with cudaErrorLaunchFailure instead of the GPU's cudaErrorIllegalAddress")
    assert run_rows(FAULT, backend) == FAULT_RULES


# Device 1's work through cuweave's own calls while device 0 is current, in a fresh process (no peer access
# enabled yet, so no pool is granted to another device): each call must make the stream's device current for
# itself. Then copies between the devices, and an event of each device. Prints "ok".
THROUGH_CUWEAVE = r'''
import numpy as np, cuweave as cw

assert cw.current_device() == cw.Device(0)
s0, s1 = cw.Stream(device=0), cw.Stream(device=1)
values = np.arange(1 << 12, dtype=np.float32)
a1 = cw.to_device(values, stream=s1)                      # host -> device 1's pool memory
assert np.array_equal(a1.to_numpy(stream=s1), values)    # and back
big = np.random.default_rng(0).random(1 << 23).astype(np.float32)  # 32 MB: staged through the pinned ring
b1 = cw.to_device(big, stream=s1)
assert np.array_equal(b1.to_numpy(stream=s1, pinned=False), big)
z1 = cw.zeros(values.shape, np.float32, stream=s1)        # an allocation and a memset
cw.ops.fill(z1, 2.0, stream=s1)
cw.ops.add(z1, a1, out=z1, stream=s1)
assert float(cw.ops.sum(z1, stream=s1).to_numpy(stream=s1)) == float(np.sum(values + 2, dtype=np.float64))
seen = []
s1.launch_host_func(lambda: seen.append(1))
with cw.capture(s1) as capture:
    cw.ops.scale(a1, 2.0, out=z1, stream=s1)
capture.graph.replay(s1)
assert np.array_equal(z1.to_numpy(stream=s1), values * 2)
s1.synchronize()                                         # waits for host callbacks too
assert seen == [1]
with s1:  # the current stream, not the current device, tells where batches go
    (batch,) = list(cw.prefetch([values], depth=1))
assert batch.device == 1 and np.array_equal(batch.to_numpy(stream=s1), values)
default1 = cw.default_stream(1)
cw.ops.fill(z1, 5.0, stream=default1)
assert (z1.to_numpy(stream=default1) == 5).all()
assert cw.current_device() == cw.Device(0)               # each call made device 1 current only for itself

a0 = cw.zeros(values.shape, np.float32, stream=s0)
s0.wait(s1.record())                                     # the event is device 1's: recorded on its stream
transfer = cw.copy_async(a0, a1, stream=s0)
s1.wait(transfer.event)                                  # the scale must not overwrite a1 before device 0 read it
cw.ops.scale(a1, 2.0, out=a1, stream=s1)
assert np.array_equal(a0.to_numpy(stream=s0), values)
assert np.array_equal(a1.to_numpy(stream=s1), values * 2)
try:
    cw.Event(device=0).record(s1)
    raise AssertionError("an event of device 0 was recorded on a stream of device 1")
except ValueError as error:
    assert "belongs to device 0 but the stream is on device 1" in str(error), error
print("ok")
'''


def test_a_program_using_cuweave_keeps_every_rule():
    """Run without Note [The device follows the stream] (StreamDeviceScope made a no-op), this fails on the
    simulator at its first copy, with the error two H200s gave: cudaErrorInvalidValue."""
    env = dict(os.environ)
    run = subprocess.run([sys.executable, "-c", THROUGH_CUWEAVE], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "ok"
