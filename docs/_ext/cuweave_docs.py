"""A small Sphinx extension for cuweave's site.

- Signatures: pybind11 names classes of the compiled module ``cuweave._core.X``, but they are public as
  ``cuweave.X`` or ``cuweave.collectives.X`` (and documented there), so signatures and docstrings are
  rewritten to the public names.
- Methods of compiled classes are shown without pybind11's ``self: cuweave._core.X`` parameter.
- A compiled function whose overloads end with a catch-all ``(*args, **kwargs)`` (it words calls that do not
  fit, in csrc/bindings/misfit.hpp) is shown as its one real overload: signature and docstring.
- Built-in types in signatures (``bytes``, ``int``) are plain text: Sphinx would otherwise link ``bytes``
  to whichever documented attribute is named ``bytes`` (``TraceEvent.bytes``).
- Exceptions: their Google-style "Attributes:" sections become field lists (napoleon's reader, applied
  to exceptions only: as an extension it would also read every property docstring that starts with
  "Some words: ..." as a property of type "Some words").
- Notebooks: a notebook rendered on a GPU (docs/rendered) takes its source's place in notebooks.md's toctree;
  each notebook page says, under its title, where it was executed: on the simulator at build time, or the GPU,
  driver and date its rendered copy records.
"""

from __future__ import annotations

import builtins
import importlib
import json
import pathlib
import re

from docutils import nodes
from sphinx import addnodes
from sphinx.ext.napoleon import Config as NapoleonConfig
from sphinx.ext.napoleon.docstring import GoogleDocstring

# The modules whose names are public (docs/api); the first that exports a compiled class names it.
PUBLIC_MODULES = ("cuweave", "cuweave.collectives", "cuweave.kernels", "cuweave.ops", "cuweave.prefetch",
                  "cuweave.graph_function", "cuweave.tracing", "cuweave.errors", "cuweave.sim")
_PRIVATE_NAME = re.compile(r"\bcuweave\._core\.(\w+)")
# pybind11 writes methods' first parameter as "self: cuweave._core.Stream"; Python's methods show no self.
_SELF_PARAMETER = re.compile(r"^\(self(?::[^,)]*)?(?:,\s*|(?=\)))")
_NAPOLEON = NapoleonConfig(napoleon_use_ivar=True)


def _public_names_of_compiled_classes() -> dict[str, str]:
    """``{"Stream": "cuweave.Stream", "Communicator": "cuweave.collectives.Communicator", ...}``."""
    names: dict[str, str] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, type) and obj.__module__ == "cuweave._core":
                names.setdefault(obj.__name__, f"{module_name}.{name}")
    return names


_public_names: dict[str, str] = {}


def _public(text: str | None) -> str | None:
    """``text`` with compiled classes named as documented; others (not public) keep their _core name."""
    if text is None:
        return None
    return _PRIVATE_NAME.sub(lambda match: _public_names.get(match[1], match[0]), text)


# pybind11's overloaded docstrings: "1. name(params) -> type" starts each overload's entry.
_OVERLOAD_LINE = re.compile(r"^\d+\. \w+(?P<signature>\(.*\))(?:\s*->\s*(?P<returns>.+))?$")
_CATCH_ALL = re.compile(r"\((?:self(?::[^,]*)?, )?\*args, \*\*kwargs\)")
# Flags and names the catch-all's real overload takes as objects and checks itself; shown with their types.
_CHECKED_PARAMETERS = re.compile(r"\b(timing|blocking|interprocess|by_kernel): object = (False|True)")


def _real_overload(obj: object) -> tuple[str, str | None, list[str]] | None:
    """The one real overload of a compiled function whose other overload is the catch-all: its signature, return
    annotation and docstring lines; None for any other function."""
    doc = getattr(obj, "__doc__", None) or ""
    if "\nOverloaded function.\n" not in doc:
        return None
    overloads: list[list] = []
    for line in doc.splitlines():
        match = _OVERLOAD_LINE.match(line.strip())
        if match:
            overloads.append([match["signature"], match["returns"], []])
        elif overloads:
            overloads[-1][2].append(line)
    real = [entry for entry in overloads if not _CATCH_ALL.fullmatch(entry[0])]
    if len(real) != 1 or len(real) == len(overloads):
        return None
    signature, returns, body = real[0]
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    signature = _CHECKED_PARAMETERS.sub(r"\1: bool = \2", signature).replace("name: object = ''", "name: str = ''")
    return signature, returns, body


def _signature(app, what, name, obj, options, signature, return_annotation):
    real = _real_overload(obj)
    if real is not None:
        signature, return_annotation = real[0], real[1]
        if return_annotation == "None" and name.endswith("__init__"):
            return_annotation = None
    if not signature and not return_annotation:
        return None  # nothing to rewrite (and autodoc cannot take a signature it did not find)
    if signature:
        signature = _SELF_PARAMETER.sub("(", signature)
    return _public(signature), _public(return_annotation)


def _docstring(app, what, name, obj, options, lines):
    real = _real_overload(obj)
    if real is not None:
        lines[:] = real[2]
    if what == "exception" and any(line.strip() == "Attributes:" for line in lines):
        lines[:] = GoogleDocstring(lines, _NAPOLEON, app, what, name, obj, options).lines()
    lines[:] = [_public(line) for line in lines]


_BUILTIN_TYPES = {name for name, value in vars(builtins).items() if isinstance(value, type)}


def _unlink_builtin_types(app, doctree):
    for xref in list(doctree.findall(addnodes.pending_xref)):
        if xref.get("refdomain") == "py" and xref.get("reftarget") in _BUILTIN_TYPES:
            xref.replace_self(xref.children)


_SIMULATOR_NOTE = (
    "This page was executed when the documentation was built, on cuweave's host simulator "
    "(CUWEAVE_BACKEND=sim): the timelines and figures below show host times of simulated work, not GPU "
    "times. Run the notebook on a GPU for real measurements."
)


def rendered_note(machine: dict) -> str:
    """What a page rendered on a GPU says of the machine that ran it (tools/notebook-figures --render)."""
    devices = machine.get("devices", 1)
    gpus = machine.get("device", "an unnamed GPU") + (f" (one of {devices})" if devices > 1 else "")
    return (f"This page was executed on {gpus}, NVIDIA driver {machine.get('driver', 'unknown')}, on "
            f"{machine.get('date', 'an unrecorded date')}, and is shown as it ran there: the timelines and figures "
            "below are GPU times of that machine.")


def _note_where_executed(app, doctree):
    docname = app.env.docname
    if docname.startswith("notebooks/"):
        text = _SIMULATOR_NOTE
    elif docname.startswith("rendered/"):
        notebook = json.loads((pathlib.Path(app.srcdir) / f"{docname}.ipynb").read_text())
        text = rendered_note(notebook["metadata"].get("cuweave", {}).get("machine", {}))
    else:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not section.children or not isinstance(section[0], nodes.title):
        return
    note = nodes.note()
    note += nodes.paragraph(text=text)
    section.insert(1, note)


def _links_take_renders(app, docname, source):
    """Pages name a notebook as notebooks/NAME (the toctree of notebooks.md, the concept pages' links); a NAME
    rendered on a GPU is named rendered/NAME instead, its page on the site."""
    if docname.startswith(("notebooks/", "rendered/")):
        return
    for name in app.config.cuweave_rendered_notebooks:
        source[0] = re.sub(rf"\bnotebooks/{re.escape(name)}\b", f"rendered/{name}", source[0])


def setup(app):
    # Importing cuweave here is safe: conf.py chose the simulator before loading this extension.
    _public_names.update(_public_names_of_compiled_classes())
    app.connect("autodoc-process-signature", _signature)
    app.connect("autodoc-process-docstring", _docstring)
    app.connect("doctree-read", _unlink_builtin_types)
    app.connect("doctree-read", _note_where_executed)
    app.connect("source-read", _links_take_renders)
    app.add_config_value("cuweave_rendered_notebooks", [], "env")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
