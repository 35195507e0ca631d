import sys; sys.path.insert(0, "tests/python")
import test_graphs as t
g, *_ = t._fork_join_graph(64)
for n in g.nodes: print(n.kind, repr(n.label), [d.label for d in n.dependencies])
