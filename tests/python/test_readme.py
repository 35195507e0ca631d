"""README.md's Python snippets run as written, each alone: a reader can paste any one of them."""

from __future__ import annotations

import pathlib
import re

import pytest

from _support import UNDER_COMPUTE_SANITIZER, exploring

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_python_snippets():
    assert len(_python_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_each_readme_snippet_runs_alone(index):
    block = _python_blocks()[index]
    if UNDER_COMPUTE_SANITIZER and "cw.trace(" in block:
        pytest.skip("a trace needs CUPTI, which compute-sanitizer holds for the whole process")
    if UNDER_COMPUTE_SANITIZER and "cw.while_loop(" in block:
        pytest.skip("the tools fail on conditional nodes in raw CUDA too (tests/conftest.py, conditional_nodes)")
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(block, f"{README}, snippet {index + 1}", "exec"), namespace)  # noqa: S102 - our own documentation
    if "cw.timer(" in block:
        ms = namespace["t"].ms  # the 10 ms spin, timed (host time on the simulator)
        assert isinstance(ms, float)
        if not exploring():  # there spins take no time
            assert ms > 5.0, ms
