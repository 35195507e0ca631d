"""Would a C++ hook in PyTorch's dispatcher, a thread-local at::RecordFunction callback, cost a PyTorch operator
little enough (at most +1 µs over plain) for a hook that, at each top-level operator, reads its schema (which
arguments it writes) and the data pointer and byte size of each tensor argument? The Python hooks it would replace
(a TorchDispatchMode, or a TorchFunctionMode) are timed beside it.

Builds a small extension with torch.utils.cpp_extension.load_inline (cached under the temp dir; --fresh builds
anew) whose attach(mode) adds a thread-local callback of scope FUNCTION: "empty" (start and end count a call and
read nothing; needsInputs(false)), "inputs" (needsInputs(true), the same), "describe" (needsInputs(true); at depth 1
only, a thread-local depth counted up in start and down in end, it takes the schema by fn.operator_schema(), a
copy, and reads each tensor input's const_data_ptr(), nbytes() and its argument's alias_info()->isWrite()),
"describe-cached" (the same, the written arguments asked of operator_schema() once per operator and kept by the
address fn.name() returns, which points into the registered schema), and two that read as describe-cached and then
keep the operators called inside from firing until the end callback: "top-off" (at::enableRecordFunction(false),
every callback off on the thread, the profiler's too) and "top-own" (at::disableCallback of its own handle, then
reenableCallback). Times x.add_(1.0) and x.add_(y) on 256 floats plain, under each callback, under a no-op
TorchFunctionMode and a no-op TorchDispatchMode, and F.linear (which calls t and addmm inside) plain and described:
medians of 9 rounds of 20,000 calls (5,000 for linear), the modes taken in turn, host µs, one intra-op thread. Each
case first lists the callbacks one call fires, by depth. Then an operator that throws, 100 times, to see that end
runs for every start. Checks that each callback ran once per operator it saw and that the depth is back to 0 (it
fails otherwise). Needs PyTorch, a C++ compiler and ninja; the extension is built with -DNDEBUG as PyTorch is
(without it RecordFunction's layout differs and its inputs() asserts).

    python3 tools/probes/torch_record_function_cost.py [--calls 20000] [--rounds 9] [--fresh]

Found (the CPU build machine, no GPU; PyPI's PyTorch 2.15.0+cu132 wheel, its CPU side; three runs; build 25-29
s fresh): x.add_(y), one operator, plain 0.81-0.83 µs; over plain, empty +0.08-0.10, inputs +0.19-0.23, describe
+0.55-0.57, describe-cached +0.26-0.27, top-own +0.41-0.42, top-off +0.65-0.71; TorchFunctionMode +1.02-1.07,
TorchDispatchMode +3.44-3.56. x.add_(1.0), whose float becomes a tensor that add_ converts inside (to, _to_copy,
empty_strided, copy_: 5 callbacks a call, depth 4): plain 2.33-2.62; empty +0.43-0.47, inputs +0.86-1.00, describe
+1.27-1.29, describe-cached +0.93-1.28, top-off +0.74-0.96, top-own +0.49-0.55; TorchFunctionMode +1.48-1.65,
TorchDispatchMode +5.84-6.26. F.linear (10 callbacks a call, 1 at depth 1, depth 4): plain 2.96-3.21; describe
+1.53-1.58, describe-cached +1.39-1.47, top-off +0.68-0.73, top-own +0.42-0.46. A callback costs every dispatcher
call it sees, nested ones too (about 0.1 µs empty, 0.2 with the inputs boxed): the depth guard saves the reads, not
the calls; turning its own callback off from start to end keeps a described operator near +0.4-0.55 µs whatever it
calls inside. operator_schema() copies the schema at each call (+0.3 µs on add_). When the operator threw, end ran
for every start (700 starts, 700 ends, depth back to 0, RecordFunction on and the callback firing after).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <ATen/record_function.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

std::optional<at::CallbackHandle> handle;

// What the callbacks count, on the thread that runs the operators.
thread_local int64_t depth = 0;
thread_local int64_t max_depth = 0;
thread_local int64_t starts = 0;
thread_local int64_t ends = 0;
thread_local int64_t top = 0;       // starts at depth 1
thread_local int64_t tensors = 0;   // tensor inputs read at depth 1
thread_local int64_t written = 0;   // of those, arguments the schema marks as written
thread_local int64_t no_schema = 0; // depth-1 starts without a schema
// The reads go here, so that the compiler cannot drop them.
thread_local uintptr_t sink[16];
thread_local uint64_t sink_at = 0;
thread_local std::vector<std::pair<int64_t, std::string>> trace_names;
// describe-cached: the bit mask of written arguments, by the address of the operator's registered name.
thread_local std::unordered_map<const char*, uint64_t> written_masks;

inline void keep(uintptr_t ptr, size_t nbytes, bool write) {
    sink[sink_at++ & 15] = ptr ^ (static_cast<uintptr_t>(nbytes) << 1) ^ static_cast<uintptr_t>(write);
}

std::unique_ptr<at::ObserverContext> count_start(const at::RecordFunction&) {
    ++starts;
    return nullptr;
}

void count_end(const at::RecordFunction&, at::ObserverContext*) { ++ends; }

void read_tensor(const c10::IValue& value, bool write) {
    if (!value.isTensor()) return;
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) return;
    // const_data_ptr(): data_ptr() would materialize a copy-on-write tensor.
    keep(reinterpret_cast<uintptr_t>(t.const_data_ptr()), t.nbytes(), write);
    ++tensors;
    written += write;
}

std::unique_ptr<at::ObserverContext> describe_start(const at::RecordFunction& fn) {
    ++starts;
    if (++depth > max_depth) max_depth = depth;
    if (depth != 1) return nullptr;
    ++top;
    const std::optional<c10::FunctionSchema> schema = fn.operator_schema();  // a copy of the schema
    if (!schema) {
        ++no_schema;
        return nullptr;
    }
    const auto& arguments = schema->arguments();
    const auto inputs = fn.inputs();
    for (size_t i = 0; i < inputs.size(); ++i) {
        const c10::AliasInfo* alias = i < arguments.size() ? arguments[i].alias_info() : nullptr;
        read_tensor(inputs[i], alias != nullptr && alias->isWrite());
    }
    return nullptr;
}

// The reads of describe-cached, at an operator at depth 1.
void describe_cached_read(const at::RecordFunction& fn) {
    ++top;
    const char* name = fn.name();
    auto found = written_masks.find(name);
    if (found == written_masks.end()) {
        uint64_t mask = 0;
        const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
        if (schema) {
            const auto& arguments = schema->arguments();
            for (size_t i = 0; i < arguments.size() && i < 64; ++i) {
                const c10::AliasInfo* alias = arguments[i].alias_info();
                if (alias != nullptr && alias->isWrite()) mask |= uint64_t{1} << i;
            }
        } else {
            ++no_schema;
        }
        found = written_masks.emplace(name, mask).first;
    }
    const uint64_t mask = found->second;
    const auto inputs = fn.inputs();
    for (size_t i = 0; i < inputs.size(); ++i) {
        read_tensor(inputs[i], i < 64 && ((mask >> i) & 1));
    }
}

std::unique_ptr<at::ObserverContext> describe_cached_start(const at::RecordFunction& fn) {
    ++starts;
    if (++depth > max_depth) max_depth = depth;
    if (depth == 1) describe_cached_read(fn);
    return nullptr;
}

// top-off: describe-cached, then RecordFunction off on this thread until the operator ends, so that the operators
// it calls inside pay nothing (nor does any other callback, the profiler's included, see them).
std::unique_ptr<at::ObserverContext> top_off_start(const at::RecordFunction& fn) {
    ++starts;
    if (++depth > max_depth) max_depth = depth;
    describe_cached_read(fn);
    at::enableRecordFunction(false);
    return nullptr;
}

void top_off_end(const at::RecordFunction&, at::ObserverContext*) {
    ++ends;
    --depth;
    at::enableRecordFunction(true);  // it was on, or the start would not have run
}

// top-own: describe-cached, then this callback alone off until the operator ends.
std::unique_ptr<at::ObserverContext> top_own_start(const at::RecordFunction& fn) {
    ++starts;
    if (++depth > max_depth) max_depth = depth;
    describe_cached_read(fn);
    at::disableCallback(*handle);
    return nullptr;
}

void top_own_end(const at::RecordFunction&, at::ObserverContext*) {
    ++ends;
    --depth;
    at::reenableCallback(*handle);
}

void depth_end(const at::RecordFunction&, at::ObserverContext*) {
    ++ends;
    --depth;
}

std::unique_ptr<at::ObserverContext> trace_start(const at::RecordFunction& fn) {
    ++starts;
    ++depth;
    trace_names.emplace_back(depth, fn.name());
    return nullptr;
}

void attach(const std::string& mode) {
    TORCH_CHECK(!handle, "a callback is already attached");
    at::RecordFunctionCallback::StartCallback start = nullptr;
    at::RecordFunctionCallback::EndCallback end = nullptr;
    bool inputs = true;
    if (mode == "empty") {
        start = count_start, end = count_end, inputs = false;
    } else if (mode == "inputs") {
        start = count_start, end = count_end;
    } else if (mode == "describe") {
        start = describe_start, end = depth_end;
    } else if (mode == "describe-cached") {
        start = describe_cached_start, end = depth_end;
    } else if (mode == "top-off") {
        start = top_off_start, end = top_off_end;
    } else if (mode == "top-own") {
        start = top_own_start, end = top_own_end;
    } else if (mode == "trace") {
        start = trace_start, end = depth_end, inputs = false;
    } else {
        TORCH_CHECK(false, "unknown mode ", mode);
    }
    handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(start, end).needsInputs(inputs).scopes({at::RecordScope::FUNCTION}));
}

void detach() {
    TORCH_CHECK(handle, "no callback attached");
    at::removeCallback(*handle);
    handle.reset();
}

void reset() {
    depth = max_depth = starts = ends = top = tensors = written = no_schema = 0;
    trace_names.clear();
}

std::unordered_map<std::string, int64_t> counts() {
    uintptr_t folded = 0;
    for (uintptr_t value : sink) folded ^= value;
    return {{"depth", depth}, {"max_depth", max_depth}, {"starts", starts}, {"ends", ends}, {"top", top},
            {"tensors", tensors}, {"written", written}, {"no_schema", no_schema},
            {"sink", static_cast<int64_t>(folded & 0xffff)}};
}

std::vector<std::pair<int64_t, std::string>> trace() { return trace_names; }

bool enabled() { return at::isRecordFunctionEnabled(); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("attach", &attach);
    m.def("detach", &detach);
    m.def("reset", &reset);
    m.def("counts", &counts);
    m.def("trace", &trace);
    m.def("enabled", &enabled);
}
"""


class NoopFunctionMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class NoopDispatchMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def build(fresh: bool):
    # cpp_extension looks for ninja on PATH; a venv's ninja sits beside its python.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    if fresh:
        directory = tempfile.mkdtemp(prefix="torch_record_function_cost_")
    else:
        directory = os.path.join(tempfile.gettempdir(), "torch_record_function_cost")
        os.makedirs(directory, exist_ok=True)
    began = time.perf_counter()
    module = load_inline(
        name="torch_record_function_cost",
        cpp_sources=[SOURCE],
        # NDEBUG as PyTorch was built: RecordFunction has a field only without it, and its inputs() asserts on it.
        extra_cflags=["-O2", "-DNDEBUG"],
        build_directory=directory,
        verbose=False,
    )
    print(f"build: {time.perf_counter() - began:.1f} s ({'fresh' if fresh else 'cached if built before'}: {directory})")
    return module


@contextlib.contextmanager
def callback(ext, mode: str):
    ext.reset()
    ext.attach(mode)
    try:
        yield
    finally:
        ext.detach()


def modes(ext) -> dict:
    return {
        "plain": contextlib.nullcontext,
        "empty": lambda: callback(ext, "empty"),
        "inputs": lambda: callback(ext, "inputs"),
        "describe": lambda: callback(ext, "describe"),
        "describe-cached": lambda: callback(ext, "describe-cached"),
        "top-off": lambda: callback(ext, "top-off"),
        "top-own": lambda: callback(ext, "top-own"),
        "TorchFunctionMode": NoopFunctionMode,
        "TorchDispatchMode": NoopDispatchMode,
    }


def check(ext, mode: str, calls: int, fired: int) -> None:
    """Each callback ran for every operator `fired` times a call (nested ones too), once at depth 1 where the mode
    counts depth, and undid its depth."""
    if mode not in ("empty", "inputs", "describe", "describe-cached", "top-off", "top-own"):
        return
    c = ext.counts()
    expected = calls if mode.startswith("top") else calls * fired  # the top modes see no nested operator
    assert c["starts"] == c["ends"] == expected, (mode, calls, fired, c)
    assert ext.enabled(), mode
    if mode != "empty" and mode != "inputs":
        assert c["top"] == calls and c["depth"] == 0 and c["no_schema"] == 0, (mode, calls, c)
        assert c["tensors"] >= calls, (mode, calls, c)


def timed(ext, table: dict, step, calls: int, rounds: int, fired: int) -> dict:
    for make in table.values():  # a round not kept: the first entry into a mode sets things up
        with make():
            for _ in range(100):
                step()
    samples = {name: [] for name in table}
    for _ in range(rounds):
        for name, make in table.items():
            with make():
                began = time.perf_counter()
                for _ in range(calls):
                    step()
                samples[name].append((time.perf_counter() - began) / calls * 1e6)
            check(ext, name, calls, fired)
    return samples


def case(ext, title: str, step, table: dict, calls: int, rounds: int) -> None:
    """What fires for one call of `step`, then its times under each mode of `table`."""
    with callback(ext, "trace"):
        step()
    fired = ext.trace()
    print(f"{title} fires {len(fired)} callbacks (depth, name): {fired}")
    with callback(ext, "describe"):
        for _ in range(1000):
            step()
    c = ext.counts()
    print(f"  describe over 1000 calls: depth 1 {c['top']}, in all {c['starts']}, deepest {c['max_depth']}, "
          f"tensors read {c['tensors']}, of them written {c['written']}")
    check(ext, "describe", 1000, len(fired))
    report(f"  medians of {rounds} rounds of {calls} calls", timed(ext, table, step, calls, rounds, len(fired)))


def report(title: str, samples: dict) -> None:
    plain = statistics.median(samples["plain"])
    print(title)
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"  {name:18s} {median:7.3f} µs/call  over plain {median - plain:+7.3f}"
              f"  (rounds {min(values):.3f}-{max(values):.3f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--fresh", action="store_true", help="build in a new temporary directory")
    options = parser.parse_args()
    torch.set_num_threads(1)
    print(f"PyTorch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
    ext = build(options.fresh)

    x, y = torch.zeros(256), torch.ones(256)
    add_ = x.add_
    table = modes(ext)
    case(ext, "x.add_(1.0), 256 floats,", lambda: add_(1.0), table, options.calls, options.rounds)
    case(ext, "x.add_(y), 256 floats,", lambda: add_(y), table, options.calls, options.rounds)
    # A composite operator: linear calls other operators inside.
    a, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
    described = ("plain", "describe", "describe-cached", "top-off", "top-own")
    table = {name: make for name, make in table.items() if name in described}
    case(ext, "F.linear(a, w, b), (4x8) (16x8) (16),", lambda: F.linear(a, w, b), table, options.calls // 4,
         options.rounds)

    # An operator that throws: does end run for every start, the depth back to 0?
    for mode in ("describe", "describe-cached", "top-off", "top-own"):
        with callback(ext, mode):
            raised = 0
            for _ in range(100):
                try:
                    torch.zeros(3) + torch.zeros(4)
                except RuntimeError:
                    raised += 1
            c = ext.counts()
            x.add_(y)  # the callback still fires after the throws
            after = ext.counts()["starts"] - c["starts"]
        print(f"{mode}, 100 x (zeros(3) + zeros(4)), raised {raised}: starts {c['starts']}, ends {c['ends']}, "
              f"depth after {c['depth']}, depth 1 {c['top']}, RecordFunction on after {ext.enabled()}, "
              f"fires after {after}")
        assert raised == 100 and c["depth"] == 0 and c["starts"] == c["ends"] and ext.enabled() and after == 1, c
    print("checks: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
