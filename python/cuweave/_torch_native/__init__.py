"""cuweave's hook in PyTorch's dispatcher, built on first use against the PyTorch installed.

Note [PyTorch's operators placed from its dispatcher]: a TorchDispatchMode that does nothing costs each PyTorch
operator about 3.5 µs of Python, and the weave's placement in Python as much again, several times the operator's
own host time (tools/probes/torch_record_function_cost.py). So inside ``cuweave.weave()``, while the current stream
takes part in no capture, PyTorch's operators on the block's thread are placed from a thread-local
at::RecordFunction callback in C++ (hook.cpp) instead: at each top-level operator it reads which arguments the
schema marks as written (once per operator), takes each CUDA tensor argument's bytes, has the weave place the
operator through cuweave's hook table (hook_table.h, plain C: the two builds share no C++ ABI), records the tensors
on the chosen stream with PyTorch's caching allocator, makes that stream PyTorch's current stream, and turns itself
off until the operator ends, so that what the operator calls inside runs where it runs and costs nothing more. At
the end it restores the stream and tells the weave of the operator's new outputs. The rules are those of Note
[PyTorch under a weave] in cuweave/_torch_hooks.py, whose Python mode stays wherever the hook cannot be built, and
under a capture: a woven function's weave begins with the mode, and a capture begun where the hook is attached
(cuweave's, or PyTorch's torch.cuda.CUDAGraph) pauses it and enters the mode until it ends. A captured operator is
placed once, as the graph is made, so the mode's cost is not paid at replays.

Note [PyTorch's operators checked from its dispatcher]: inside ``cuweave.sanitize()`` the same callback tells the
sanitizer each operator, as Note [PyTorch under the sanitizer] in cuweave/_torch_hooks.py describes the mode doing:
its CUDA tensors on PyTorch's current stream (or the stream a weave placed it on), pinned CPU tensors beside them,
its new outputs as blocks the allocator handed out that it writes, and record_stream. The call site is read from
the calling thread's Python frames (from the backward() call's on autograd's threads, which the callback is handed
on to). What the operator is named differs only for composite operators: the hook sees the one called
(``torch matmul.default``), the mode what it becomes below autograd (``torch mm.default``). PyTorch's events and
synchronizes still come from its GPU trace, told by Python callbacks.

PyTorch drops what a RecordFunction callback throws, so a race cannot be raised through the operator: it is kept
until the outermost operator on the thread ends, then set as the calling thread's asynchronous exception (the thread
that called backward(), for autograd's threads), which Python raises as the operator returns to it, as for CuPy's
launches (cuweave.errors._deferred). Not set at once: PyTorch runs Python code inside an operator (its GPU trace
callbacks, as the allocator frees a block), which would meet the exception, and PyTorch logs and drops what they
raise. The operator is queued, as PyTorch's own sanitizer queues it before raising; the mode raises before it is
queued. Any other failure inside the hook is kept and raised as the weave's or sanitize block ends; the operator
itself runs as it would outside the block.

Python looks for an asynchronous exception after a function call returns, not after an operator's syntax
(``a + b``, ``x[i] = v``), so the race may still be pending as the next operator starts: the hook then takes it back
(hold_raised in hook_table.h) and sets it again as that operator ends. A block freed outside any operator (at a
``del``, or a temporary let go after ``a + b``) runs the GPU trace callbacks too: they are wrapped to run with the
race held back (cuweave._core.call_holding_raised). As the race propagates, Python lets go of the operator's outputs
while the error is set; PyTorch's GPU trace callbacks for a block freed then fail on that error (a SystemError that
replaces the race, or a crash), so the hook keeps the outputs of an operator whose end raised a race until the next
operator starts or the hook detaches, and the CUDA tensors of an operator that threw (Python lets go of its
arguments, a temporary such as ``torch.ones(3, device="cuda")``, with the program's error set). It keeps no other
tensor past its operator: a block is freed, and named freed, where the program lets go of its tensor. A copy
between the host and a device without ``non_blocking`` synchronizes its stream inside, after the copy: its new
output is ready for every stream as the call returns (Note [Blocking copies] in hook.cpp). An in-place view
(``detach_``, ``squeeze_``: PyTorch's inplace_view tag), ``requires_grad_`` and ``retain_grad`` write no bytes,
though their schemas mark the tensor written.

The hook checks once it is built (``CUWEAVE_TORCH_HOOK=python`` keeps the mode's checks). Its checks were chosen by
name until GPU runs showed them raising every race the mode raises: the first, with the race set as the
asynchronous exception at once, lost races to the GPU trace callbacks; the second, with the race kept and held as
above but the outputs not kept, still lost some to a block freed as the race propagated, and took timm's
``detach_`` for a write; the third held each operator's tensors until the next operator (a free named at the next
operator's line) and took a blocking copy's output (``torch.tensor(data, device="cuda")``) as still being written.
A sanitize block nested in a weave whose block attached the hook is checked by the hook, one hook per thread.

The extension is compiled with PyTorch's own cpp_extension (a C++ compiler and ninja are needed; no CUDA toolkit:
it uses c10's device-generic stream interface) and cached under PyTorch's extensions directory, named by PyTorch's
version and a digest of its sources. The first weave or sanitize block of a process that imported PyTorch loads a
cached build at once (a tenth of a second); without one, it starts the build in a background thread, and blocks use
the Python mode until it is ready. ``CUWEAVE_TORCH_HOOK=python`` keeps the Python mode; ``native`` waits for the
build at the first block and raises if it fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import threading
from typing import Any

from cuweave import _core

_DIRECTORY = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_builder: threading.Thread | None = None
_module: Any = None
_failure: str | None = None  # why the hook could not be built, once known


def _choice() -> str:
    choice = os.environ.get("CUWEAVE_TORCH_HOOK", "auto") or "auto"
    if choice not in ("auto", "native", "python"):
        raise ValueError(f"CUWEAVE_TORCH_HOOK={choice!r}: expected auto, native or python")
    return choice


_SOURCES = ("hook.cpp", "hook_table.h")


def _name(torch: Any) -> str:
    """The extension's name: it carries PyTorch's version (the cache is rebuilt for another PyTorch, whose C++ ABI may
    differ) and a digest of its sources (a cache under this name is up to date, and loads without building)."""
    digest = hashlib.sha256()
    for source in _SOURCES:
        with open(os.path.join(_DIRECTORY, source), "rb") as file:
            digest.update(file.read())
    version = re.sub(r"[^0-9A-Za-z]", "_", torch.__version__)
    return f"cuweave_torch_hook_{version}_{digest.hexdigest()[:16]}"


def _load() -> Any:
    """Builds the extension if its cache is not up to date, and imports it (PyTorch's cpp_extension.load)."""
    torch = __import__("torch")
    from torch.utils import cpp_extension

    if not cpp_extension.is_ninja_available():
        raise RuntimeError("ninja is not installed (pip install ninja)")
    return cpp_extension.load(
        name=_name(torch),
        sources=[os.path.join(_DIRECTORY, "hook.cpp")],
        extra_include_paths=[_DIRECTORY],
        # NDEBUG as PyTorch is built: RecordFunction's layout differs without it.
        extra_cflags=["-O2", "-DNDEBUG"],
        verbose=False,
    )


def _cached() -> bool:
    """Whether PyTorch's extensions cache holds the extension built from these sources (its private layout, read
    where it can be: otherwise the build runs apart, as for a first use)."""
    torch = __import__("torch")
    try:
        from torch.utils.cpp_extension import _get_build_directory

        name = _name(torch)
        return os.path.isfile(os.path.join(_get_build_directory(name, verbose=False), f"{name}.so"))
    except Exception:  # noqa: BLE001 - another PyTorch's layout
        return False


def _build() -> None:
    global _module, _failure
    try:
        # In a process of its own, which finishes the build even if this one exits first: killed halfway through,
        # PyTorch's builder would leave its lock behind, and every later build would wait for it.
        # Its output goes to a file, not a pipe: with no reader left, a write would end it halfway too.
        with tempfile.TemporaryFile(mode="w+") as output:
            built = subprocess.run([sys.executable, "-m", "cuweave._torch_native"], stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True, check=False)
            if built.returncode != 0:
                output.seek(0)
                lines = output.read().strip().splitlines()
                raise RuntimeError(lines[-1] if lines else f"the build exited with {built.returncode}")
        _module = _load()  # built: imported without building again
    except Exception as error:  # noqa: BLE001 - a compiler's or PyTorch's failure: the Python mode stays
        _failure = f"{type(error).__name__}: {error}"


def _load_cached() -> None:
    global _module, _failure
    try:
        _module = _load()
    except Exception as error:  # noqa: BLE001 - a compiler's or PyTorch's failure: the Python mode stays
        _failure = f"{type(error).__name__}: {error}"


def hook() -> Any:
    """The built hook module, or None while it is being built, where it could not be, or with
    CUWEAVE_TORCH_HOOK=python. The first call loads it from PyTorch's extensions cache, or starts its build there
    (with ``native``, waits for it)."""
    global _builder
    if _module is not None or _failure is not None:
        return _module
    choice = _choice()
    if choice == "python":
        return None
    with _lock:
        if _builder is None and _module is None and _failure is None and _cached():
            _load_cached()  # a tenth of a second: used from this block on
        elif _builder is None:
            _builder = threading.Thread(target=_build, name="cuweave PyTorch hook build", daemon=True)
            _builder.start()
    if choice == "native":
        if _builder is not None:
            _builder.join()
        if _failure is not None:
            raise RuntimeError(f"cuweave: CUWEAVE_TORCH_HOOK=native, but its hook could not be built ({_failure})")
    return _module


def wait(timeout: float | None = None) -> Any:
    """Waits up to `timeout` seconds for the hook's build begun by hook(), starting it if needed; the module or None
    (see failure())."""
    hook()
    builder = _builder
    if builder is not None:
        builder.join(timeout)
    return _module


def building() -> bool:
    """Whether the hook's build is under way."""
    builder = _builder
    return builder is not None and builder.is_alive()


def built() -> Any:
    """The hook module where it is built and imported, else None (starts nothing)."""
    return _module


def checks() -> bool:
    """Whether the hook also checks PyTorch's operators for the sanitizer (see the Note): unless
    ``CUWEAVE_TORCH_HOOK=python``."""
    return _choice() != "python"


def failure() -> str | None:
    """Why the hook could not be built, or None."""
    return _failure


def attach(module: Any) -> None:
    """Places and checks this thread's PyTorch operators from the hook until detach()."""
    module.attach(_core.hook_table())


def detach(module: Any) -> None:
    """Undoes attach(); raises the first failure the hook met since (see the Note)."""
    failed = module.detach()
    _core.raise_hook_failure()
    if failed:
        raise RuntimeError(f"cuweave: {failed}")
