"""README.md's Python snippets run as written, in order, in one namespace."""

from __future__ import annotations

import pathlib
import re

from _support import UNDER_COMPUTE_SANITIZER, exploring

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_python_snippets():
    assert len(_python_blocks()) >= 3


def test_readme_snippets_run():
    namespace: dict[str, object] = {}
    for block in _python_blocks():
        if UNDER_COMPUTE_SANITIZER and "cw.trace(" in block:
            continue  # a trace needs CUPTI, which compute-sanitizer holds; no later snippet uses its names
        if UNDER_COMPUTE_SANITIZER and "cw.while_loop(" in block:
            continue  # the tools fail on conditional nodes in raw CUDA too (tests/conftest.py, conditional_nodes)
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own documentation
    ms = namespace["t"].ms  # the tour's 10 ms spin, timed (host time on the simulator)
    assert isinstance(ms, float)
    if not exploring():  # there spins take no time
        assert ms > 5.0, ms
