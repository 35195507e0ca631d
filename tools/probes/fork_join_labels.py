"""Prints the nodes of the fork/join test graph as the active backend labels them (a probe)."""
import sys

sys.path.insert(0, "tests/python")
import test_graphs  # noqa: E402

graph, *_ = test_graphs._fork_join_graph(64)
for node in graph.nodes:
    print(node.kind, repr(node.label), [d.label for d in node.dependencies])
