#!/usr/bin/env python3
"""Render `nbs/index.ipynb` into `README.md` (the README is generated; edit the notebook).

Usage: python tools/readme.py [--check]

Markdown cells are copied as they are; code cells become ```python blocks (cells marked
`#| hide` are left out and nbdev directives are dropped); text outputs that the notebook keeps
follow their cell in a plain block. With `--check` nothing is written and the exit code says
whether README.md is up to date. CI runs it and fails on any difference.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOOTER = "\n<!-- Generated from nbs/index.ipynb by tools/readme.py: edit the notebook, not this file. -->\n"


def _src(cell):
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def render(nb_path=ROOT / "nbs" / "index.ipynb"):
    nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        src = _src(cell).strip("\n")
        if cell["cell_type"] == "markdown":
            parts.append(src)
        elif cell["cell_type"] == "code":
            lines = src.splitlines()
            directives = [line for line in lines if line.startswith("#|")]
            if any(d.replace(" ", "") in ("#|hide", "#|exporti") for d in directives):
                continue
            code = "\n".join(line for line in lines if not line.startswith("#|")).strip("\n")
            if code:
                parts.append(f"```python\n{code}\n```")
            text = "".join(
                "".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream"
            )
            if text.strip():
                parts.append(f"```\n{text.rstrip()}\n```")
    return "\n\n".join(p for p in parts if p) + "\n" + FOOTER


def main(argv):
    out = render()
    readme = ROOT / "README.md"
    if "--check" in argv:
        ok = readme.exists() and readme.read_text(encoding="utf-8") == out
        print("README.md is up to date" if ok else "README.md is stale: run python tools/readme.py")
        return 0 if ok else 1
    readme.write_text(out, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
