"""The markers that keep tools/gpu-check's compute-sanitizer pass meaningful are where they must be: a test that
replays a graph with a conditional node is marked conditional_nodes (compute-sanitizer's tools fail on such
replays in raw CUDA too, so the pass deselects them); one missed shows up as an error the tool does not report
(seen: cudaErrorMisalignedAddress under memcheck, in a woven capture with a WHILE loop), and it loses the
process's context for every test after it."""

from __future__ import annotations

import ast
import pathlib

import pytest

CONDITIONALS = {"while_loop", "if_then", "if_else", "switch"}
HERE = pathlib.Path(__file__).parent


def called_names(node: ast.AST) -> set[str]:
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            target = call.func
            names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def marks(decorators: list[ast.expr]) -> set[str]:
    """The pytest.mark.NAME names among decorators (with or without arguments)."""
    found = set()
    for decorator in decorators:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) \
                and target.value.attr == "mark":
            found.add(target.attr)
    return found


def module_marks(tree: ast.Module) -> set[str]:
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in statement.targets):
            values = statement.value.elts if isinstance(statement.value, (ast.List, ast.Tuple)) else [statement.value]
            return marks(values)
    return set()


def unmarked_conditional_replays(source: str) -> list[str]:
    tree = ast.parse(source)
    if "conditional_nodes" in module_marks(tree):
        return []
    return [node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
            and CONDITIONALS & called_names(node) and "replay" in called_names(node)
            and "conditional_nodes" not in marks(node.decorator_list)]


@pytest.mark.parametrize("path", sorted(HERE.glob("test_*.py")), ids=lambda p: p.name)
def test_every_test_that_replays_a_conditional_node_is_marked_conditional_nodes(path):
    assert unmarked_conditional_replays(path.read_text()) == []


def test_the_check_finds_an_unmarked_replay_and_accepts_a_marked_one():
    unmarked = """
def test_loop(stream):
    with cw.capture(stream) as cap:
        with cw.while_loop(flag, ">", 0):
            cw.ops.add(flag, -1, out=flag)
    cap.graph.replay(stream)
"""
    marked = "import pytest\n@pytest.mark.conditional_nodes" + unmarked
    built_only = unmarked.replace("    cap.graph.replay(stream)\n", "")
    assert unmarked_conditional_replays(unmarked) == ["test_loop"]
    assert unmarked_conditional_replays(marked) == []
    assert unmarked_conditional_replays(built_only) == []
    assert unmarked_conditional_replays("import pytest\npytestmark = pytest.mark.conditional_nodes\n" + unmarked) == []
