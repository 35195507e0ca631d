"""Running a user's program as ``python script.py`` (or ``python -m module``) would, inside a cuweave tool
(``python -m cuweave trace|sanitize``): the same ``sys.argv``, ``__main__``, ``sys.path[0]`` and exit code."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Sequence


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
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException:  # noqa: BLE001 - printed as Python prints an uncaught exception
        traceback.print_exc()
        return 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            del sys.path[0]


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1
