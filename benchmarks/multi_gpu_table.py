"""multi_gpu.py's rows and their table: each row's figures by column, its ratio to a reference and its target,
and the measurements that failed."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field


@dataclass
class Row:
    key: str
    unit: str
    higher_is_better: bool
    references: tuple[str, ...]  # columns the ratio compares with, the first available one
    target: float | None = None  # cuweave / reference, where one is set
    values: dict[str, float] = field(default_factory=dict)  # "cuweave", "raw", "torch" -> figure
    notes: dict[str, str] = field(default_factory=dict)  # column -> why it has no figure
    detail: str = ""

    def reference(self) -> str | None:
        return next((c for c in self.references if c in self.values), None)

    def ratio(self) -> float | None:
        reference = self.reference()
        ours = self.values.get("cuweave")
        if reference is None or ours is None or not self.values[reference]:
            return None
        return ours / self.values[reference]

    def meets(self) -> bool | None:
        ratio = self.ratio()
        if ratio is None or self.target is None or ratio != ratio:  # nan: no verdict
            return None
        return ratio >= self.target if self.higher_is_better else ratio <= self.target


COLUMNS = {"cuweave": "cuweave", "raw": "raw CUDA", "torch": "PyTorch"}
failures: list[str] = []


def failed(row: Row, column: str, error: BaseException | str) -> None:
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    row.notes[column] = "error: " + text
    failures.append(f"{row.key} [{COLUMNS[column]}]: {text}")
    print(f"{row.key} [{COLUMNS[column]}] failed: {text}", flush=True)
    if isinstance(error, BaseException) and not isinstance(error, (RuntimeError, TimeoutError)):
        traceback.print_exception(error, limit=-3)


def measure(rows: list[Row], column: str, run) -> None:
    """Runs `run()` for these rows' `column`: its figures (one per row, in order; None for none) or its error."""
    try:
        figures = run()
    except Exception as error:  # noqa: BLE001  (a failing row must not stop the others)
        for row in rows:
            failed(row, column, error)
        return
    for row, value in zip(rows, figures):
        if value is not None:
            row.values[column] = value


def skip(rows: list[Row], column: str, why: str) -> None:
    for row in rows:
        row.notes.setdefault(column, why)


def fmt(value: float) -> str:
    magnitude = abs(value)
    digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    return f"{value:.{digits}f}"


def print_table(rows: list[Row]) -> None:
    header = ["row", "unit", "cuweave", "raw CUDA", "PyTorch", "ratio", "target", "meets target"]
    lines = []
    for row in rows:
        cells = []
        for column in COLUMNS:
            if column in row.values:
                cells.append(fmt(row.values[column]))
            else:
                cells.append("err" if row.notes.get(column, "").startswith("error") else "n/a")
        ratio, reference = row.ratio(), row.reference()
        references = " / ".join(COLUMNS[c] for c in row.references)
        target = ("none (reported)" if row.target is None else
                  f"{'>=' if row.higher_is_better else '<='} {row.target:g}x {references}")
        meets = row.meets()
        lines.append([row.key, row.unit, *cells,
                      "-" if ratio is None else f"{ratio:.3f} (/ {COLUMNS[reference]})", target,
                      "-" if meets is None else ("yes" if meets else "NO")])
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    print("\n| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |")
    for row in rows:
        if row.detail:
            print(f"  {row.key}: {row.detail}")
    missing: dict[tuple[str, str], list[str]] = {}  # (column, why) -> rows
    for row in rows:
        for column, note in row.notes.items():
            if column not in row.values:
                missing.setdefault((column, note), []).append(row.key)
    for (column, note), keys in missing.items():
        where = "every row" if len(keys) == len(rows) else ", ".join(keys)
        print(f"  {COLUMNS[column]} ({where}): {note}")
