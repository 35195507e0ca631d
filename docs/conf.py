"""Sphinx configuration of cuweave's documentation site (built by tools/docs).

The site is built on the host simulator, whatever the machine: the API reference imports cuweave. A notebook
with a copy rendered on a GPU in docs/rendered (tools/notebook-figures --render docs/rendered, committed) is
shown as rendered there; the others are executed at build time, so their pictures and figures are the
simulator's (host times). Each page says which (docs/_ext/cuweave_docs.py).
"""

from __future__ import annotations

import logging
import os
import pathlib
import sys

# Before anything imports cuweave: autodoc imports it here, and the notebooks' kernels inherit the
# environment. Forced, not defaulted, so that a build on a GPU machine renders the same pages.
os.environ["CUWEAVE_BACKEND"] = "sim"

sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

project = "cuweave"
author = "the cuweave authors"
copyright = "the cuweave authors"  # noqa: A001 - Sphinx's name
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "myst_nb",  # MyST Markdown pages and executed notebooks (it loads myst_parser itself)
    "cuweave_docs",  # docs/_ext/cuweave_docs.py: pybind11 signatures, the simulator note on notebooks
]

# docs/notebooks links to the repository's notebooks/, where the tests run them; Jupyter may leave checkpoints there.
exclude_patterns = ["_build", "jupyter_execute", "notebooks/.ipynb_checkpoints", "**/.ipynb_checkpoints"]
# A notebook rendered on a GPU replaces its source on the site (notebooks.md's toctree follows, in the extension).
RENDERED = sorted(path.stem for path in (pathlib.Path(__file__).parent / "rendered").glob("*.ipynb"))
exclude_patterns += [f"notebooks/{name}.ipynb" for name in RENDERED]
cuweave_rendered_notebooks = RENDERED
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# Every cross-reference must resolve (warnings are errors in tools/docs).
nitpicky = True
# Types of NumPy, the standard library and pybind11's stubs that signatures name: there is no intersphinx
# (the build needs no network), so these stay plain text rather than links.
nitpick_ignore_regex = [
    ("py:class", r"(numpy|typing|collections|pathlib)\..*"),
    # Objects users only pass back or use as a `with` block, never build or subclass: the functions that
    # return them (cuweave.collectives.group, cuweave.reads/writes, the conditionals) document them.
    ("py:class", r"cuweave\._core\.(CollectiveGroup|DeclaredAccess)"),
    ("py:class", r"cuweave\._conditionals\._Body"),
    ("py:class", r"cuweave\._range\.F"),  # the decorated function's type (a TypeVar)
]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_default_options = {"members": True, "undoc-members": True}
autodoc_typehints = "signature"
autodoc_class_signature = "separated"  # pybind11 classes: the class, then __init__'s signature
autodoc_inherit_docstrings = False  # pybind11 members would inherit pybind11's generic object docstrings

# Notebooks: executed at every build, on the simulator (above), as tests/python/test_notebooks.py runs them:
# a real kernel, a 600 s limit per cell (they take seconds on the simulator), a temporary working folder.
# A failing cell is a warning showing the cell and its traceback, which -W (tools/docs) makes a failed build;
# raising instead would stop the build with only the notebook's name.
nb_execution_mode = "force"
nb_execution_excludepatterns = ["rendered/*"]  # shown with the outputs the GPU gave them
nb_execution_timeout = 600
nb_execution_in_temp = True
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_merge_streams = True
# nbclient announces every notebook it starts at INFO on the traitlets logger; the build's output stays Sphinx's.
logging.getLogger("traitlets").setLevel(logging.WARNING)

html_theme = "furo"
html_title = "cuweave"
