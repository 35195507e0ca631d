"""CUDA C++ kernels compiled at run time (NVRTC), cached in memory and on disk."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import threading
import warnings
from collections.abc import Iterable

from cuweave import _core, _private_paths

_memory: dict[str, tuple[bytes, str, str]] = {}
_lock = threading.Lock()
_counts = {"memory_hits": 0, "disk_hits": 0, "compiles": 0}


def cache_dir() -> pathlib.Path:
    """Where compiled kernels are kept: $CUWEAVE_CACHE_DIR, else $XDG_CACHE_HOME/cuweave/kernels, else
    ~/.cache/cuweave/kernels. cuweave makes the folder readable and writable by you alone (0700), and uses it only
    while no other user could write it or a folder above it (as ssh does with its keys): otherwise it warns once
    and compiles in memory."""
    if os.environ.get("CUWEAVE_CACHE_DIR"):
        return pathlib.Path(os.environ["CUWEAVE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "cuweave" / "kernels"


def cache_info() -> dict[str, int]:
    """How kernels were found so far in this process: memory_hits, disk_hits, compiles."""
    with _lock:
        return dict(_counts)


def _key(source: str, name: str, options: tuple[str, ...], architecture: str) -> str:
    from cuweave import __version__

    identity = json.dumps([__version__, _core.runtime_version(), architecture, name, list(options), source])
    return hashlib.sha256(identity.encode()).hexdigest()


_refused_folders: set[str] = set()


def _trusted_cache_folder() -> pathlib.Path | None:
    """The cache folder, made 0700 where it is missing, if no other user could have put files there; else None,
    said once per folder: a kernel loaded from it runs with this process's rights, and anyone who can write the
    folder can write a cubin and a sidecar whose hash matches it (ssh refuses its keys on the same rule)."""
    folder = cache_dir()
    try:
        _private_paths.make_private_folder(folder)
    except OSError:
        return None  # a read-only or full file system only costs a compile next time
    reason = _private_paths.untrusted_reason(folder)
    if reason is None:
        return folder
    with _lock:
        if str(folder) in _refused_folders:
            return None
        _refused_folders.add(str(folder))
    warnings.warn(f"cuweave: compiled kernels are neither loaded from nor stored in {folder}, since another user "
                  f"could have written there: {reason}. Kernels are compiled in memory instead; to keep them on "
                  f"disk, set CUWEAVE_CACHE_DIR to a folder of your own that only you can write (e.g. mode 0700)",
                  RuntimeWarning, stacklevel=3)
    return None


def _load_from_disk(folder: pathlib.Path, key: str) -> tuple[bytes, str, str] | None:
    try:
        if any(_private_paths.untrusted_reason(folder / f"{key}{suffix}") for suffix in (".json", ".cubin")):
            return None  # planted by someone else, or left writable: compile again (and replace it)
        meta = json.loads((folder / f"{key}.json").read_text())
        binary = (folder / f"{key}.cubin").read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") != hashlib.sha256(binary).hexdigest():
        return None  # torn or foreign file: compile again
    return binary, meta["lowered_name"], meta.get("log", "")


def _store_on_disk(folder: pathlib.Path, key: str, binary: bytes, lowered_name: str, log: str) -> None:
    meta = {"lowered_name": lowered_name, "log": log, "sha256": hashlib.sha256(binary).hexdigest()}
    try:
        for suffix, data in ((".cubin", binary), (".json", json.dumps(meta).encode())):
            _private_paths.write_private_file(folder / f"{key}{suffix}", data)
    except OSError:
        pass  # a read-only or full cache folder only costs a compile next time


def _split_parameters(text: str) -> list[str]:
    """The parameters in a signature's parentheses, split at the commas outside <>, () and []."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def read_only_parameters(source: str, name: str) -> tuple[int, ...] | None:
    """The indices of the ``const T*`` parameters of the ``__global__`` function ``name`` in ``source``
    (``name`` may carry template arguments, which are ignored), or None where the signature is not found
    (say, made by a macro). A pointer is read-only when ``const`` qualifies what it points to
    (``const float*``, ``float const*``), not when it qualifies only the pointer (``float* const``)."""
    base = re.escape(name.split("<", 1)[0].strip())
    source = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.DOTALL)
    match = re.search(r"__global__[^;{}]*?\b" + base + r"\s*\(", source)
    if match is None:
        return None
    depth, end = 1, match.end()
    while end < len(source) and depth:
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        end += 1
    if depth:
        return None
    read_only = []
    for index, parameter in enumerate(_split_parameters(source[match.end() : end - 1])):
        pointee = parameter.rsplit("*", 1)[0] if "*" in parameter else None
        if pointee is not None and re.search(r"\bconst\b", pointee):
            read_only.append(index)
    return tuple(read_only)


def compile(  # noqa: A001 - cuweave.compile mirrors the builtin's role for CUDA source
    source: str, name: str, *, options: Iterable[str] = (), device: object = None
) -> _core.Kernel:
    """Compiles CUDA C++ ``source`` for the device's architecture and returns the kernel ``name``.

    ``name`` is an ``extern "C"`` function name or a C++ name expression such as ``"scale<float>"``.
    ``options`` are NVRTC options (``"-DBLOCK=256"``, ``"--use_fast_math"``). Results are cached in
    memory and in :func:`~cuweave.kernels.cache_dir`, keyed by source, name, options, architecture and versions. A
    compile error raises :class:`cuweave.CompileError` with the compiler's log; on the simulator,
    compiling raises a CudaError naming the limitation. The kernel's ``log`` attribute holds warnings.
    For the stream-race sanitizer, the signature's ``const T*`` parameters are declared read-only
    (``kernel.read_only``); arrays passed to the other parameters count as read and written.
    """
    if not isinstance(source, str) or not isinstance(name, str):
        raise TypeError("compile() takes the CUDA source and the kernel name as str")
    if isinstance(options, str):
        raise TypeError('options is a list of strings, e.g. ["-DN=4"], not one string')
    options = tuple(options)
    if not all(isinstance(option, str) for option in options):
        raise TypeError("every option must be a str")
    ordinal = _core.current_device() if device is None else _core.checked_device(device)
    major, minor = _core.device_properties(ordinal).compute_capability
    key = _key(source, name, options, f"sm_{major}{minor}")
    with _lock:
        found = _memory.get(key)
        if found:
            _counts["memory_hits"] += 1
    if found is None:
        folder = _trusted_cache_folder()
        found = _load_from_disk(folder, key) if folder is not None else None
        if found is not None:
            with _lock:
                _counts["disk_hits"] += 1
        else:
            found = _core.compile_kernel(source, name, list(options), ordinal)
            if folder is not None:
                _store_on_disk(folder, key, *found)
            with _lock:
                _counts["compiles"] += 1
        with _lock:
            _memory[key] = found
    binary, lowered_name, log = found
    kernel = _core.Kernel(binary, lowered_name, ordinal)
    kernel.log = log
    read_only = read_only_parameters(source, name)
    if read_only is not None and all(index < len(kernel.parameter_sizes) for index in read_only):
        kernel.read_only = read_only  # for the stream-race sanitizer (Note [Kernel accesses])
    return kernel


def reads(array: object) -> _core.DeclaredAccess:
    """Wraps a kernel argument that this launch only reads: ``k(grid, block, (cw.writes(y), cw.reads(x), n))``.
    The race sanitizer and ``cuweave.weave()`` then count it as read (by default an array passed to a
    non-``const`` pointer parameter counts as read and written). The kernel gets the array's pointer."""
    return _core.DeclaredAccess(array, False)


def writes(array: object) -> _core.DeclaredAccess:
    """Wraps a kernel argument that this launch writes (and may read), overriding a ``const`` parameter or
    ``kernel.read_only``: see :func:`reads`."""
    return _core.DeclaredAccess(array, True)


__all__ = ["cache_dir", "cache_info", "compile", "read_only_parameters", "reads", "writes"]
