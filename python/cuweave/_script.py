"""Running a user's program as ``python script.py`` (or ``python -m module``) would, inside a cuweave tool
(``python -m cuweave trace|sanitize``): the same ``sys.argv``, ``__main__``, ``sys.path[0]`` and exit code."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Sequence

from cuweave import _core


def run(target: Sequence[str], *, module: bool) -> int:
    """Runs ``target`` (a script path or, with ``module``, a module name, then its arguments) and returns the
    exit code Python would give: the SystemExit code, 1 after printing an uncaught exception's traceback, 130
    after Ctrl-C."""
    if not target:
        raise ValueError("nothing to run: give a script (or -m module) and its arguments")
    name, arguments = target[0], list(target[1:])
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    try:
        if module:
            sys.argv = [name, *arguments]  # runpy puts the module's file there, as python -m does
            sys.path[0:0] = [os.getcwd()]
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        else:
            if not os.path.exists(name):
                print(f"python -m cuweave: can't open file {name!r}: no such file", file=sys.stderr)
                return 2
            sys.argv = [name, *arguments]
            sys.path[0:0] = [os.path.dirname(os.path.abspath(name))]
            runpy.run_path(name, run_name="__main__")
        return 0
    except SystemExit as exit_request:
        return _exit_code(exit_request.code)
    except KeyboardInterrupt as interrupt:
        _print_uncaught(interrupt)
        return 130
    except BaseException as error:  # noqa: BLE001 - printed as Python prints an uncaught exception
        _print_uncaught(error)
        return 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            del sys.path[0]


# Frames of the tool running the program (runpy's and this module's): `python script.py` shows none of them.
_RUNNER_FILES = ("<frozen runpy>", os.sep + "runpy.py", os.path.abspath(__file__))


def _print_uncaught(error: BaseException) -> None:
    """Prints `error`'s traceback as Python would for the program run alone: without the runner's frames, and,
    for a race the sanitizer found, without the frames its report skips too (cuweave's, PyTorch's, CuPy's; a line
    says so)."""
    from cuweave.errors import RaceError

    report = traceback.TracebackException.from_exception(error)
    hidden = _trim(report, isinstance(error, RaceError))
    print("".join(report.format()), end="", file=sys.stderr)
    if hidden:
        frames = "1 frame" if hidden == 1 else f"{hidden} frames"
        print(f"({frames} inside cuweave, PyTorch or CuPy left out of the traceback: the report names the call "
              "sites)", file=sys.stderr)


def _trim(report: traceback.TracebackException, race: bool) -> int:
    """Drops the runner's frames (and, for a race, the plumbing's) from `report` and the exceptions chained to
    it; returns how many plumbing frames went."""
    kept, hidden = [], 0
    for frame in report.stack:
        if frame.filename.endswith(_RUNNER_FILES):
            continue
        # A race report names its call sites itself, skipping the same frames: between the user's call and the
        # check that raised it, they only bury it.
        if race and _core._is_plumbing(frame.filename):
            hidden += 1
            continue
        kept.append(frame)
    report.stack = traceback.StackSummary.from_list(kept)
    for chained in (report.__cause__, report.__context__):
        if chained is not None:
            hidden += _trim(chained, race)
    return hidden


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1
