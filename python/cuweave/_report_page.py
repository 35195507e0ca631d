"""The one page ``python -m cuweave tour`` and ``python -m cuweave trace`` write (``index.html``): self-contained,
opening in any browser with nothing installed, each part's text beside its timeline (inline SVG)."""

from __future__ import annotations

import dataclasses
import html
import pathlib

_STYLE = """
body { font-family: sans-serif; max-width: 1180px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
.note { color: #555; } .finding { font-weight: bold; } ul { margin: 0.3em 0; }
svg { max-width: 100%; height: auto; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
"""


@dataclasses.dataclass(frozen=True)
class Section:
    """One part of the page: a title, lines of text (figures), a conclusion, a timeline and files beside."""

    title: str
    lines: tuple[str, ...] = ()
    conclusion: str = ""
    svg: str = ""
    preformatted: str = ""  # shown as it is (a summary table)
    files: tuple[str, ...] = ()  # names relative to the page


def write_page(path: pathlib.Path, *, title: str, notes: list[str], sections: list[Section],
               files: list[str]) -> pathlib.Path:
    """Writes the page to `path`: its title, notes (the backend, the clock), the sections, then links to
    `files` (names relative to the page, e.g. the Perfetto trace)."""
    out = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_text(title)}</title>",
           f"<style>{_STYLE}</style></head><body>", f"<h1>{_text(title)}</h1>"]
    out += [f'<p class="note">{_text(note)}</p>' for note in notes]
    for section in sections:
        out.append(f"<h2>{_text(section.title)}</h2>")
        if section.lines:
            out.append("<ul>" + "".join(f"<li>{_text(line)}</li>" for line in section.lines) + "</ul>")
        if section.conclusion:
            out.append(f'<p class="finding">{_text(section.conclusion)}</p>')
        if section.svg:
            out.append(section.svg)
        if section.preformatted:
            out.append(f"<pre>{_text(section.preformatted)}</pre>")
        if section.files:
            out.append("<p>" + ", ".join(_link(name) for name in section.files) + "</p>")
    if files:
        out.append('<p class="note">' + ", ".join(_link(name) for name in files) + "</p>")
    out.append("</body></html>\n")
    path.write_text("\n".join(out), encoding="utf-8")
    return path


def _text(text: str) -> str:
    return html.escape(text, quote=False)


def _link(name: str) -> str:
    return f'<a href="{html.escape(name, quote=True)}">{_text(name)}</a>'
