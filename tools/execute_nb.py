#!/usr/bin/env python3
"""Execute a notebook, every cell included (`#| gpu` and `#| slow` ones too), and save its outputs.

Usage: python tools/execute_nb.py NOTEBOOK [--out PATH] [--benchmarks PATH]

Used to refresh the outputs (tables, figures) that notebooks keep for the docs: run
`python tools/execute_nb.py nbs/07_bench.ipynb --benchmarks BENCHMARKS.md` on the GPU, then
`nbdev_clean`. With `--benchmarks`, the `res` the bench notebook computed is also rendered to
that Markdown file. Stops at the first failing cell (exit code 1), still writing what ran.
"""
import argparse
import os
import sys
from pathlib import Path

from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # the package from this checkout, installed or not


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("--out", default=None, help="where to write the executed notebook (default: in place)")
    ap.add_argument("--benchmarks", default=None, help="also write benchmarks_markdown(res) here")
    args = ap.parse_args(argv)
    nb_path = Path(args.notebook).resolve()
    nb = read_nb(nb_path)
    os.chdir(nb_path.parent)
    shell = CaptureShell()
    shell.run("%matplotlib inline")
    failed = None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code": continue
        shell.cell(cell)
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            failed = i
            err = next(o for o in cell.outputs if o.get("output_type") == "error")
            print(f"cell {i} failed: {err.get('ename')}: {err.get('evalue')}", file=sys.stderr)
            print("\n".join(err.get("traceback", [])), file=sys.stderr)
            break
    write_nb(nb, args.out or nb_path)
    if args.benchmarks and "res" in shell.user_ns:
        from fused_csa_nb.bench import benchmarks_markdown
        Path(args.benchmarks).write_text(benchmarks_markdown(shell.user_ns["res"]), encoding="utf-8")
    print(f"executed {nb_path.name}: {len(nb.cells)} cells" + ("" if failed is None else f", stopped at cell {failed}"))
    return 0 if failed is None else 1


if __name__ == "__main__":
    sys.exit(main())
