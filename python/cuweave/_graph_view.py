"""How a Graph shows itself: DOT text (for Graphviz) and an SVG drawing that Jupyter renders inline (the Graph
class, in bindings/bind_graph.cpp, calls these).

The SVG is laid out here (nodes in rows by their depth in the DAG) so that notebooks show graphs
without Graphviz installed.
"""

from __future__ import annotations

import collections
from html import escape

from cuweave import _core

_FILL = {
    "kernel": "#cfe2ff",
    "copy": "#d1e7dd",
    "memset": "#e2e3e5",
    "host": "#fff3cd",
    "event_record": "#f8d7da",
    "event_wait": "#f8d7da",
    "empty": "#ffffff",
    "graph": "#e0cffc",
}
_BOX_WIDTH, _BOX_HEIGHT, _GAP_X, _GAP_Y = 168, 34, 24, 38


def kinds(graph: _core.Graph) -> collections.Counter:
    """How many nodes of each kind the graph has, e.g. ``Counter({"kernel": 3, "copy": 2})``."""
    return collections.Counter(node.kind for node in graph.nodes)


def to_dot(graph: _core.Graph, name: str = "cuweave_graph") -> str:
    """The graph in Graphviz's DOT language (``dot -Tsvg`` draws it)."""
    nodes = graph.nodes
    index = {id(node): i for i, node in enumerate(nodes)}
    lines = [
        f"digraph {name} {{",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
    ]
    for i, node in enumerate(nodes):
        label = node.label.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  n{i} [label="{label}", tooltip="{node.kind}", fillcolor="{_FILL.get(node.kind, "#f8f9fa")}"];')
    for i, node in enumerate(nodes):
        for dependency in node.dependencies:
            lines.append(f"  n{index[id(dependency)]} -> n{i};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(graph: _core.Graph) -> str:
    """An SVG drawing of the graph: one row per depth, arrows from each node to its dependents."""
    nodes = graph.nodes
    index = {id(node): i for i, node in enumerate(nodes)}
    depth = [0] * len(nodes)
    for i, node in enumerate(nodes):  # dependencies come first
        depth[i] = max((depth[index[id(d)]] + 1 for d in node.dependencies), default=0)
    rows: dict[int, list[int]] = collections.defaultdict(list)
    for i, d in enumerate(depth):
        rows[d].append(i)
    widest = max((len(r) for r in rows.values()), default=1)
    width = widest * (_BOX_WIDTH + _GAP_X) + _GAP_X
    height = max(len(rows), 1) * (_BOX_HEIGHT + _GAP_Y) + _GAP_Y
    position = {}
    for d, members in rows.items():
        offset = (width - len(members) * (_BOX_WIDTH + _GAP_X) + _GAP_X) / 2
        for k, i in enumerate(members):
            position[i] = (offset + k * (_BOX_WIDTH + _GAP_X), _GAP_Y + d * (_BOX_HEIGHT + _GAP_Y))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
    ]
    for i, node in enumerate(nodes):
        x, y = position[i]
        for dependency in node.dependencies:
            dx, dy = position[index[id(dependency)]]
            parts.append(
                f'<line x1="{dx + _BOX_WIDTH / 2:.1f}" y1="{dy + _BOX_HEIGHT:.1f}" x2="{x + _BOX_WIDTH / 2:.1f}" '
                f'y2="{y:.1f}" stroke="#555" marker-end="url(#arrow)"/>'
            )
    for i, node in enumerate(nodes):
        x, y = position[i]
        label = node.label if len(node.label) <= 26 else node.label[:25] + "…"
        parts.append(
            f'<g><title>{escape(node.kind)}: {escape(node.label)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{_BOX_WIDTH}" height="{_BOX_HEIGHT}" rx="6" '
            f'fill="{_FILL.get(node.kind, "#f8f9fa")}" stroke="#333"/>'
            f'<text x="{x + _BOX_WIDTH / 2:.1f}" y="{y + _BOX_HEIGHT / 2 + 4:.1f}" text-anchor="middle">'
            f"{escape(label)}</text></g>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def describe(graph: _core.Graph) -> str:
    counts = kinds(graph)
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "empty"
    return f"<cuweave.Graph on device {graph.device}: {sum(counts.values())} nodes ({summary})>"

