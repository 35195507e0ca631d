"""CuPy's kernels, copies, pinned pool and events under the sanitizer.

Note [CuPy under the sanitizer]: CuPy has no hook around its operations, but it compiles every kernel it
generates (ufuncs and operators, ElementwiseKernel, its reductions, RawKernel from source) through one Python
function, and launches them through CUDA's driver. So:

* from cuweave's import (or CuPy's, if later) each source CuPy compiles is read for its kernels' parameter
  lists: CuPy passes an array as a `CArray<T, ndim, ...>` (its data pointer, size, shape and strides in
  bytes), `const` for the operation's inputs;
* while the sanitizer is on, the backend reports each launch of such a kernel with its parameter values
  (Note [Kernels other libraries launch] in tracer.hpp), and each array becomes a read (const) or a write of
  the bytes from its lowest to its highest element, on the launch's stream, named by the user's line;
* CuPy's copies through CUDA's runtime (cudaMemcpy, cudaMemcpyAsync: get(), set(), asarray, copies between
  arrays) are reported by the backend too, cuweave's own left out (Note [cuweave's own runtime calls] in
  csrc/cuda/own_calls.hpp): each reads its source and writes its destination on its stream, where the end lies
  on a device or in pinned host memory; a PyTorch operator's copies are left to its hooks;
* CuPy's pinned pool hands a dropped block out again at once (only CuPy's own transfers keep theirs until their
  copy's event fires), so a block cupy.cuda.alloc_pinned_memory hands out is checked as written by the host,
  against the copies still queued from it or into it;
* CuPy's event records, stream waits and synchronizes through CUDA's runtime (cupy.cuda.Event, Stream.record,
  wait_event and synchronize, Device().synchronize(), and those inside CuPy that no Python call shows, such as
  its synchronize of the stream a __cuda_array_interface__ names) are reported by the backend as the ordering
  they make, and its event deletions by a wrapper of its Event class; what CuPy orders without such a call (a
  synchronous copy waits for its stream inside CUDA) is taken as for any adopted stream, as waited for once
  CUDA finds it idle (Note [Foreign synchronizes]): a race whose first kernel had finished before the second
  was checked is not named.

A race found at a CuPy launch cannot stop that launch (it is already under way inside CuPy, without the
GIL): the kernel runs, and the RaceError is raised in the launching thread as CuPy's call returns
(RaceWarning in warn mode, as for any race). What cannot be read is said, once per kernel, in a
RuntimeWarning at the user's line, never passed in silence: a kernel whose parameters are raw pointers
(RawKernel, and CuPy's CUB block reductions, which pass `void*`); a kernel launched from the user's code whose
source cuweave did not read (CuPy's CUB routines, cuBLAS, cuFFT and cuSOLVER, modules loaded from files with
RawModule(path=...), other libraries' kernels); and a CuPy kernel compiled before cuweave was imported.
Kernels launched from threads without Python are not seen at all. README lists all of these.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import threading
import warnings
import weakref
from typing import Any, NamedTuple

from cuweave import _core, _torch_hooks
from cuweave._import_watch import ImportWatch
from cuweave.errors import RaceError, _deferred

_foreign = _core.sanitizer.foreign  # what another library did, told to the sanitizer

# C type names CuPy gives its dtypes in kernel parameter lists (cupy/_core/_scalar.pyx), with their sizes.
_ITEMSIZE = {
    "bool": 1, "signed char": 1, "unsigned char": 1, "char": 1, "short": 2, "unsigned short": 2, "float16": 2,
    "half": 2, "__half": 2, "int": 4, "unsigned int": 4, "float": 4, "long long": 8, "unsigned long long": 8,
    "long": 8, "unsigned long": 8, "double": 8, "thrust::complex<float>": 8, "complex<float>": 8,
    "thrust::complex<double>": 16, "complex<double>": 16,
}
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')
_TYPEDEF = re.compile(r"typedef\s+([\w:<>, ]+?)\s+(\w+)\s*;")
_CARRAY = re.compile(r"^(const\s+)?CArray<\s*(.+?)\s*,\s*(\d+)\s*(?:,[^>]*)?>\s+\w+$")


class Parameter(NamedTuple):
    """One kernel parameter as the source declares it: an array (CArray) read or written, a pointer (its
    extent unknown), or a plain value (scalars, indexers)."""

    kind: str  # "array", "pointer" or "value"
    writes: bool = False
    ndim: int = 0
    itemsize: int = 0  # 0: not known from the source; taken from the strides


def signatures(source: str) -> dict[str, list[Parameter]]:
    """The extern "C" kernels a CUDA source defines, each with its parameters (typedefs resolved)."""
    typedefs = {alias: target.strip() for target, alias in _TYPEDEF.findall(source)}
    found = {}
    for name, text in _KERNEL.findall(source):
        found[name] = [_parameter(declaration, typedefs) for declaration in _split_parameters(text)]
    return found


def _split_parameters(text: str) -> list[str]:
    """A parameter list split at its top-level commas (template arguments hold commas too)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _resolve(name: str, typedefs: dict[str, str]) -> str:
    for _ in range(8):  # typedef chains are short; a cycle would be a broken source
        if name not in typedefs:
            break
        name = typedefs[name]
    return name


def _parameter(declaration: str, typedefs: dict[str, str]) -> Parameter:
    declaration = " ".join(declaration.split())
    array = _CARRAY.match(declaration)
    if array:
        element = _resolve(array.group(2), typedefs)
        return Parameter("array", writes=array.group(1) is None, ndim=int(array.group(3)),
                         itemsize=_ITEMSIZE.get(element, 0))
    if "*" in declaration:
        return Parameter("pointer")
    return Parameter("value")


def layout(parameters: list[Parameter]) -> list[tuple[bool, bool, int, int]]:
    """A kernel's parameters as the backend reads its launches' arguments: (array, writes, ndim, itemsize) each."""
    return [(p.kind == "array", p.writes, p.ndim, p.itemsize) for p in parameters]


def ranges_of(parameters: list[Parameter], values: list[bytes]) -> list[tuple[int, int, bool]] | None:
    """The (address, bytes, writes) ranges a launch touches, from its parameter values (each array from its lowest
    element to its highest); None where the values do not fit the declared parameters (then nothing can be said
    of the launch)."""
    return _foreign.argument_ranges(layout(parameters), values)


# --- what CuPy compiled ---------------------------------------------------------------------------------------

_modules: dict[int, dict[str, list[Parameter]]] = {}  # CUmodule -> its kernels' parameters
_readable_compiled = False  # whether CuPy compiled or loaded a kernel whose launches say what they touch
_recording = False


def _record_compiles(cupy: Any) -> None:
    """Wraps the function CuPy compiles every generated kernel through, to read each source's kernels."""
    global _recording
    if _recording:
        return
    compiler = cupy.cuda.compiler
    compile_module = getattr(compiler, "_compile_module_with_cache", None)
    if compile_module is None:
        return  # another CuPy: attach() says its kernels are not read
    _recording = True

    def compile_and_read(source, *args, **kwargs):  # noqa: ANN001, ANN202
        global _readable_compiled
        module = compile_module(source, *args, **kwargs)
        try:
            found = signatures(source)
            if found:
                _modules.setdefault(int(module.ptr), {}).update(found)
        except Exception:  # noqa: BLE001 - reading is best effort; what it misses is warned of at launch
            return module
        if any(_readable(parameters) for parameters in found.values()):
            _readable_compiled = True
            _watch_for_placing()
        return module

    compiler._compile_module_with_cache = compile_and_read


# --- launches, while the sanitizer is on -------------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STANDARD_LIBRARY = sysconfig.get_paths()["stdlib"] + os.sep
_warned: set[str] = set()
_streams: dict[int, _core.Stream] = {}


def _is_plumbing(file: str) -> bool:
    """CuPy's and cuweave's Python files, and the standard library CuPy calls while it compiles."""
    return file.startswith(_PACKAGE) or file.startswith(_STANDARD_LIBRARY) or any(
        part in file for part in ("-packages/cupy/", "-packages/cupyx/", "-packages/cupy_backends/"))


def _warn_once(kernel: str, why: str) -> None:
    """Says once per kernel, at the user's line that called into CuPy, that the sanitizer does not check it.
    Shown even where warnings are errors: raised here, it could only end this callback, or go off later inside
    CuPy's own code; it tells what is not checked, and the program goes on."""
    if kernel in _warned:
        return
    _warned.add(kernel)
    shown = kernel if len(kernel) <= 160 else kernel[:157] + "..."
    frame = sys._getframe(1)
    while frame is not None and _is_plumbing(frame.f_code.co_filename):
        frame = frame.f_back
    file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("always", RuntimeWarning)
        warnings.warn_explicit(f"cuweave: the sanitizer does not check kernel {shown!r}: {why}", RuntimeWarning,
                               file, line)


_RAW_POINTERS = ("its parameters are raw pointers, whose extents the launch does not say (a RawKernel; CuPy's "
                 "CUB reductions: CUPY_ACCELERATORS= (empty) has CuPy use its own kernels, which are checked)")
_NOT_READ = ("it was not compiled by CuPy from a source cuweave read, so what it reads and writes is unknown (CuPy's "
             "CUB routines, cuBLAS, cuFFT, RawModule files, other libraries; for CuPy's reductions, "
             "CUPY_ACCELERATORS= (empty) has CuPy use its own kernels, which are checked)")
_COMPILED_BEFORE = ("it was compiled before cuweave was imported (import cuweave before CuPy runs kernels, or run "
                    "the program under python -m cuweave sanitize)")


def _wants(kernel: str, module: int) -> list[tuple[bool, bool, int, int]] | None:
    """The parameters of a kernel whose launches are placed and checked (layout()), or None for one whose launches
    are not (asked at its first launch, on the launching thread)."""
    parameters = _modules.get(module, {}).get(kernel)
    if parameters is None:
        _unread(kernel)
        return None
    if any(p.kind == "pointer" for p in parameters):
        if _core.sanitizer.enabled():  # (inside a weave alone, nothing is said to be unchecked)
            _warn_once(kernel, _RAW_POINTERS)
        return None
    return layout(parameters) if _readable(parameters) else None


def _readable(parameters: list[Parameter]) -> bool:
    """Whether a kernel's launches say what they touch: arrays, and no raw pointers."""
    return any(p.kind == "array" for p in parameters) and not any(p.kind == "pointer" for p in parameters)


def _unread(kernel: str) -> None:
    """A kernel whose source cuweave did not read: said to be unchecked when the user's own code launched it,
    not when PyTorch's hooked operators or cuweave did (or a thread with no Python frame, which is not the user's)."""
    if "cuweave::" in kernel or not _core.sanitizer.enabled():
        return
    try:
        launcher = sys._getframe(2)  # the frame running when the launch began: _unread <- _wants <- launch
    except ValueError:
        return
    file = launcher.f_code.co_filename
    if file.startswith(_PACKAGE) or "-packages/torch/" in file or _torch_hooks.running_an_operator():
        return
    _warn_once(kernel, _COMPILED_BEFORE if kernel.startswith(("cupy_", "cupyx_")) else _NOT_READ)


_NEVER_DESTROYED = (0, 1, 2)  # the legacy default stream (null or CU_STREAM_LEGACY), the per-thread one


def _stream(handle: int, owner: Any = None) -> _core.Stream:
    """cuweave's adoption of a stream CuPy runs work on, kept while the CuPy stream that made the handle
    (`owner`, CuPy's current stream when it has this handle, or the CuPy stream made with it while CuPy was
    watched) lives: a destroyed stream's handle must not be
    asked about again (the sanitizer asks an adopted stream whether it is idle, a trace asks each live stream its
    id: CUDA crashes on a destroyed handle), and CUDA may hand the handle out again. A handle CuPy did not make
    (cupy.cuda.ExternalStream, or a Stream.from_external wrapper, over a cuweave or PyTorch stream), or one CuPy
    does not hold as current, is adopted for the one use: its owner may destroy it while CuPy's wrapper lives on
    (cuweave closes its adoptions as it closes a stream of its own; a kept one would then be closed)."""
    stream = _streams.get(handle)
    if stream is None or stream.closed:
        stream = _core.Stream.from_external(handle)
        if handle in _NEVER_DESTROYED:
            _streams[handle] = stream
        else:
            cuda = sys.modules["cupy"].cuda
            if owner is None:
                current = cuda.get_current_stream()
                owner = current if current.ptr == handle else _made_streams.get(handle)
            wraps_another_librarys = isinstance(owner, cuda.ExternalStream) or (
                getattr(owner, "_foreign_stream_ref", None) is not None)  # Stream.from_external's wrapper
            if owner is not None and not wraps_another_librarys:
                _streams[handle] = stream
                weakref.finalize(owner, _streams.pop, handle, None)
    return stream


def _launched(kernel: str, handle: int, placed: _core.Stream | None,
              ranges: list[tuple[int, int, bool]] | None) -> type[BaseException] | None:
    """Checks one launch on the stream `handle` (run on `placed` where the weave moved it: Note [Other libraries'
    kernels in a weave] in the core), or warns that its parameter values (`ranges`: None) do not fit its source.
    Returns an exception class for the backend to raise once the launch has returned."""
    if ranges is None:
        _warn_once(kernel, "its parameter values do not match its source's parameter list")
        return None
    if not _core.sanitizer.enabled() or not ranges:
        return None
    name = f"cupy {kernel}"
    return _checked(handle, name, ranges) if placed is None else _checked_on(placed, name, ranges)


def _checked(handle: int, name: str, ranges: list) -> type[BaseException] | None:
    """Checks another library's operation on the stream `handle`: the race found (or, in warn mode, its warning
    made an error) as an exception class for the backend to raise once that library's call has returned."""
    return _checked_on(_stream(handle), name, ranges)


def _checked_on(stream: _core.Stream, name: str, ranges: list) -> type[BaseException] | None:
    try:
        _foreign.operation(stream, name, ranges)
    except (RaceError, Warning) as error:
        return _deferred(error)
    return None


# --- CuPy's kernels in a weave ------------------------------------------------------------------------------
#
# The backend places CuPy's launches itself, in the launching thread's CUPTI callback (Note [Other libraries'
# kernels in a weave] in the core). The watch costs each weave a CUPTI subscription and each launch inside it a
# callback, so a weave watches only once CuPy has compiled or loaded a kernel it can place (before that, there is
# nothing to place; tools/probes/weave_cost_with_cupy_imported.py).


class _Placing(threading.local):
    """Whether this thread's weave places CuPy's work, and watches it."""

    def __init__(self) -> None:
        self.weaving = False  # whether a weave on this thread places CuPy's work
        self.watched = False  # whether that weave holds an attach()


_placing = _Placing()


def begin_placing() -> bool:
    """Called as a weave() block begins: CuPy's launches on this thread are placed until end_placing(), once CuPy has
    a kernel whose source cuweave read (_watch_for_placing) and if the backend is CUDA. In a weave under a capture,
    CuPy's current stream joins the capture (its work in the block, moved or not, is captured too). Returns whether
    the caller must call end_placing()."""
    placing = _placing  # (attributes set, not __init__ again: this is on every weave's way in)
    placing.weaving = True
    placing.watched = False
    _foreign.place_foreign_work(True, current_stream_handle())  # (the legacy default stream joins no capture)
    _watch_for_placing()
    return True


def current_stream_handle() -> int | None:
    """CuPy's current stream on this thread, as a handle (0: the legacy default stream); None without CuPy."""
    cupy = sys.modules.get("cupy")
    return None if cupy is None else cupy.cuda.get_current_stream().ptr


def current_stream() -> _core.Stream | None:
    """cuweave's adoption of CuPy's current stream on this thread; None without CuPy."""
    handle = current_stream_handle()
    return None if handle is None else _stream(handle)


def _watch_for_placing() -> None:
    """Attaches for this thread's weave once CuPy has compiled or loaded a kernel cuweave can place (at the weave's start,
    or at that kernel's compile, which comes before its launch). Before that there is nothing to place, and the
    watch would cost the weave its start and end (a CUPTI subscription, about 28 µs on an H200) and each launch
    inside it a callback."""
    if _placing.weaving and not _placing.watched and _readable_compiled:
        _placing.watched = attach()


def end_placing() -> bool:
    """Undoes a begin_placing(), before the weave ends: under a capture, the weave's first stream waits for CuPy's
    streams that joined it. Returns whether any did (the graph then holds CuPy's work, and its replays are ordered
    with CuPy's stream)."""
    placing = _placing
    watched = placing.watched
    placing.weaving = placing.watched = False
    try:
        return _foreign.place_foreign_work(False)
    finally:
        if watched:
            detach()


def _copied(call: str, destination: int, destination_memory: str, source: int, source_memory: str, size: int,
            handle: int) -> type[BaseException] | None:
    """Checks one copy another library queued through CUDA's runtime (`call`: cudaMemcpy or cudaMemcpyAsync; CuPy's
    get(), set() and copies between arrays): a read of its source and a write of its destination on its stream,
    each where it lies on the device or in pinned host memory (pageable memory is read or written during the call,
    not by the stream). A PyTorch operator's copies are its hooks' to tell, and copies from threads running no
    Python code are not the user's. Returns an exception class for the backend to raise once the copy call has
    returned."""
    if not _core.sanitizer.enabled() or not _made_by_the_users_code():
        return None
    ranges = [(address, size, writes) for address, memory, writes in
              ((source, source_memory, False), (destination, destination_memory, True)) if memory != "pageable"]
    if not ranges:
        return None
    return _checked(handle, f"copy ({call.split('_pt')[0]})", ranges)


_TORCH_HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_hooks.py")


def _made_by_the_users_code() -> bool:
    """Whether the copy being told was made from Python code (a library's worker thread without it is not the
    user's, as for kernels) outside a PyTorch operator running through cuweave's hooks (their frame would be on
    the stack)."""
    frame = sys._getframe(1).f_back  # the caller of _copied: None when the backend called in from no Python code
    if frame is None:
        return False
    while frame is not None:
        if frame.f_code.co_filename == _TORCH_HOOKS:
            return False
        frame = frame.f_back
    return True


# --- CuPy's pinned memory -------------------------------------------------------------------------------------

def _report_pinned_reuse(cupy: Any) -> None:
    """Wraps cupy.cuda.alloc_pinned_memory: a block it hands out is written by the host from then on, so it is
    checked against the copies still queued from it or into it. CuPy's pinned pool takes a block back as soon as
    its last reference goes; only the transfers CuPy makes itself keep theirs until the copy's event fires."""
    pinned_memory = cupy.cuda.pinned_memory
    original = pinned_memory.alloc_pinned_memory

    def alloc_pinned_memory(size):  # noqa: ANN001, ANN202
        pointer = original(size)
        if _core.sanitizer.enabled() and pointer.ptr and size > 0:
            _foreign.host_operation("cupy.cuda.alloc_pinned_memory (the block, handed out, is written by the host)",
                                    [(int(pointer.ptr), int(size), True)])
        return pointer

    alloc_pinned_memory.__doc__ = original.__doc__
    for module in (cupy.cuda, pinned_memory):
        _unwrapped.append((module, "alloc_pinned_memory", original))
        setattr(module, "alloc_pinned_memory", alloc_pinned_memory)


# --- CuPy's events ----------------------------------------------------------------------------------------

_unwrapped: list[tuple[Any, str, Any]] = []  # (class or module, attribute, original) while CuPy is watched
_INHERITED = object()  # an original that the class took from its base


def _ordered(kind: str, event: int, handle: int) -> None:
    """An event record ("record"), stream wait ("wait") or synchronize ("synchronize stream", "synchronize event",
    "synchronize device": `handle` is then the device's index) that another library made through CUDA's runtime,
    told as the ordering it makes: CuPy's own (Event.record, Stream.record and wait_event, Stream.synchronize,
    Device().synchronize()), and those inside CuPy that no Python call shows (its synchronize of the stream a
    __cuda_array_interface__ names)."""
    # Called in from a thread running no Python code (NCCL's and CUDA's own): not the user's ordering.
    if not _core.sanitizer.enabled() or sys._getframe().f_back is None:
        return
    if kind == "record":
        _foreign.event_recorded(event, _stream(handle))
    elif kind == "wait":
        _foreign.stream_waited_event(_stream(handle), event)
    elif kind == "synchronize stream":
        _foreign.stream_synchronized(_stream(handle))
    elif kind == "synchronize event":
        _foreign.event_synchronized(event)
    else:
        _foreign.device_synchronized(handle)


_made_streams: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # handle -> the CuPy stream made it


def _report_ordering(cupy: Any) -> None:
    """Wraps what the backend's reports (_ordered) leave out: an event's destruction, and each stream CuPy makes,
    so that work on it is known by its owner also when the stream is not CuPy's current one (x.set(host,
    stream=s), x.get(stream=s))."""
    from cupy.cuda import stream as cupy_stream

    event_class, stream_class = cupy_stream.Event, cupy_stream.Stream

    def wrap(cls: Any, name: str, after: Any) -> None:
        original = getattr(cls, name)

        def call(self, *args, **kwargs):  # noqa: ANN001, ANN202
            result = original(self, *args, **kwargs)
            if _core.sanitizer.enabled():
                after(self, result, *args, **kwargs)
            return result

        _unwrapped.append((cls, name, cls.__dict__.get(name, _INHERITED)))
        setattr(cls, name, call)

    def stream_made(stream: Any, *_args: Any, **_kwargs: Any) -> None:
        if getattr(stream, "ptr", 0):
            _made_streams[int(stream.ptr)] = stream

    wrap(stream_class, "__init__", stream_made)
    original_del = event_class.__dict__.get("__del__")
    if original_del is not None:
        def destroyed(self, *args):  # noqa: ANN001, ANN202
            if _core.sanitizer.enabled() and getattr(self, "ptr", 0):
                _foreign.event_destroyed(int(self.ptr))
            original_del(self, *args)

        _unwrapped.append((event_class, "__del__", original_del))
        event_class.__del__ = destroyed


def _stop_reporting_ordering() -> None:
    while _unwrapped:
        cls, name, original = _unwrapped.pop()
        if original is _INHERITED:
            delattr(cls, name)
        else:
            setattr(cls, name, original)


# --- on and off ---------------------------------------------------------------------------------------------

_attached_count = 0
_watching = False


def attach() -> bool:
    """Called as a sanitize() block begins (and by CUWEAVE_SANITIZE): CuPy's kernels and events are checked
    until the matching detach(), if CuPy is imported and the backend is CUDA; CuPy imported later is attached
    at its import. Returns whether the caller must detach."""
    global _attached_count
    _attached_count += 1
    if _attached_count == 1 and "cupy" in sys.modules:
        _start()
    return True


def _start() -> None:
    global _watching
    cupy = sys.modules["cupy"]
    _record_compiles(cupy)
    if _watching or _core.backend_name() != "cuda":
        return
    try:
        _foreign.watch_launches(_wants, _launched, _copied, _ordered)
        _report_ordering(cupy)
        _report_pinned_reuse(cupy)
    except Exception as error:  # noqa: BLE001 - another library's internals, or CUPTI held by another tool
        _stop_reporting_ordering()
        _warn_unwatched(error)
        return
    _watching = True


_unwatched_warned = False


def _warn_unwatched(error: BaseException) -> None:
    """Says once per process that CuPy's kernels go unchecked and unplaced, and why (most often: CUPTI is held by another CUDA
    tool, such as compute-sanitizer or Nsight Systems, for as long as the process lives). Shown even where warnings
    are errors, as for a kernel the sanitizer cannot read: the program and cuweave's own checks go on, and every
    sanitize() block would otherwise fail at its start for a condition that no block can change."""
    global _unwatched_warned
    if _unwatched_warned:
        return
    _unwatched_warned = True
    with warnings.catch_warnings():
        warnings.simplefilter("always", RuntimeWarning)
        warnings.warn(f"cuweave: CuPy's work is not watched in this process: the sanitizer does not check its kernels, "
                      f"and weaves leave them on CuPy's stream ({error})", RuntimeWarning, stacklevel=4)


def detach() -> None:
    """Undoes an attach()."""
    global _attached_count, _watching
    if _attached_count == 0:
        return
    _attached_count -= 1
    if _attached_count == 0 and _watching:
        _watching = False
        _stop_reporting_ordering()
        _foreign.watch_launches(None, None)


def _cupy_imported(module: Any) -> None:
    _record_compiles(module)
    if _attached_count > 0:
        _start()


def record_from_import() -> None:
    """At cuweave's import: CuPy's compiles are read from now on (from CuPy's import, if that comes later)."""
    if "cupy" in sys.modules:
        _record_compiles(sys.modules["cupy"])
    else:
        ImportWatch("cupy", _cupy_imported).start()
