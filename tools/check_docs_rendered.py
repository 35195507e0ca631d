#!/usr/bin/env python3
"""The notebooks rendered on a GPU (docs/rendered) are shown in place of their sources on the built site.

Each docs/rendered/NAME.ipynb must be a notebook of notebooks/ as it is now, executed with the CUDA backend and the machine
recorded (tools/notebook-figures --render), with no error output; the built site must have its page, saying the
machine, and no page executed on the simulator for it. Usage: tools/check_docs_rendered.py [BUILT_HTML]
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parents[1]
built = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "docs" / "_build" / "html"
problems = []
rendered = sorted((root / "docs" / "rendered").glob("*.ipynb"))
for path in rendered:
    name = path.stem
    notebook = json.loads(path.read_text())
    machine = notebook.get("metadata", {}).get("cuweave", {}).get("machine", {})
    source = root / "notebooks" / path.name
    if not source.exists():
        problems.append(f"{path.name}: no notebook of that name in notebooks/")
    elif [cell["source"] for cell in json.loads(source.read_text())["cells"]] != [cell["source"] for cell in notebook["cells"]]:
        problems.append(f"{path.name}: rendered from another version of notebooks/{path.name}; render it again")
    if machine.get("backend") != "cuda" or not machine.get("device"):
        problems.append(f"{path.name}: not rendered on a GPU (cuweave.machine: {machine}); render it with "
                        "tools/notebook-figures --render docs/rendered on a GPU machine")
    errors = [o for cell in notebook["cells"] for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        problems.append(f"{path.name}: a cell raised ({errors[0].get('ename')})")
    page = built / "rendered" / f"{name}.html"
    if not page.exists():
        problems.append(f"{path.name}: the site has no page for it ({page})")
    elif "This page was executed on " + str(machine.get("device")) not in page.read_text():
        problems.append(f"{path.name}: its page does not name the machine that ran it")
    if (built / "notebooks" / f"{name}.html").exists():
        problems.append(f"{path.name}: the site also executed {name} on the simulator")
for problem in problems:
    print("rendered notebooks:", problem)
if problems:
    sys.exit(1)
print(f"rendered notebooks: {len(rendered)} shown as rendered on a GPU")
