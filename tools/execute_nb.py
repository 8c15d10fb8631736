#!/usr/bin/env python3
"""Execute notebooks, `#| gpu` and `#| slow` cells included, and save their outputs (then `nbdev_clean` them).

Usage: python tools/execute_nb.py [NOTEBOOK ...] [--gpu] [--skip FLAGS] [--out PATH] [--benchmarks PATH]

Used to refresh the outputs (tables, figures) that notebooks keep for the docs. On an SM90+ GPU,
every notebook of `nbs/` that has `#| gpu` cells (or only those named):

    python tools/execute_nb.py --gpu --benchmarks BENCHMARKS.md

With `--gpu`, every cell runs (those flagged `#| slow` are skipped unless `--skip ""`), but only
the outputs of the `#| gpu` cells are written back: the other cells keep what the notebook had,
so the diff is the GPU evidence and nothing else. Without `--gpu` every cell runs and every
output is kept. With `--benchmarks`, the `res` a notebook computed (the bench chapter's) is also
rendered to that Markdown file. A notebook stops at its first failing cell (exit code 1), still
writing what ran; the next notebook is executed all the same. `nbdev_clean` is applied to each
written notebook (it keeps outputs: `clear_all = False` in settings.ini).
"""
import argparse
import os
import re
import sys
from pathlib import Path

from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # the package from this checkout, installed or not


def flags(cell):
    "The test flags of a cell (`#| gpu`, `#| slow`, ...): its leading `#|` directive lines."
    out = set()
    for line in cell.source.splitlines():
        m = re.match(r"^\s*#\|\s*([\w-]+)\s*$", line)
        if m: out.add(m.group(1))
        elif line.strip() and not line.lstrip().startswith("#|"): break
    return out


def execute(nb_path, out=None, gpu=False, skip=(), benchmarks=None):
    "Run the notebook's code cells in order; return the index of the failing cell or None."
    nb_path = Path(nb_path).resolve()
    nb = read_nb(nb_path)
    cwd = os.getcwd()
    os.chdir(nb_path.parent)
    shell = CaptureShell()
    shell.run("%matplotlib inline")
    failed, ran = None, 0
    try:
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or flags(cell) & set(skip): continue
            kept = cell.get("outputs", [])
            shell.cell(cell)
            ran += 1
            err = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
            if gpu and "gpu" not in flags(cell): cell["outputs"] = kept      # only the GPU evidence changes
            if err:
                failed = i
                print(f"{nb_path.name}: cell {i} failed: {err.get('ename')}: {err.get('evalue')}", file=sys.stderr)
                print("\n".join(err.get("traceback", [])), file=sys.stderr)
                break
    finally:
        os.chdir(cwd)
    dst = Path(out) if out else nb_path
    write_nb(nb, dst)
    _clean(dst)
    if benchmarks and isinstance(shell.user_ns.get("res"), dict) and "gpu" in shell.user_ns["res"]:   # the bench chapter's
        from fused_csa_nb.bench import benchmarks_markdown
        Path(benchmarks).write_text(benchmarks_markdown(shell.user_ns["res"]), encoding="utf-8")
        print(f"wrote {benchmarks}")
    print(f"executed {nb_path.name}: {ran} code cells" + ("" if failed is None else f", stopped at cell {failed}"))
    return failed


def _clean(path):
    "`nbdev_clean` one notebook (run from the repository root, so settings.ini applies)."
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        from nbdev.clean import nbdev_clean
        nbdev_clean.__wrapped__(fname=str(path))
    finally:
        os.chdir(cwd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", help="default with --gpu: every notebook in nbs/ with `#| gpu` cells")
    ap.add_argument("--gpu", action="store_true", help="write back only the outputs of `#| gpu` cells")
    ap.add_argument("--skip", default=None, help='skip cells with these flags (default: "slow" with --gpu, else none)')
    ap.add_argument("--out", default=None, help="where to write the executed notebook (one notebook; default: in place)")
    ap.add_argument("--benchmarks", default=None, help="also write benchmarks_markdown(res) here")
    args = ap.parse_args(argv)
    if not args.notebooks:
        if not args.gpu: ap.error("name the notebooks (or pass --gpu for all with GPU cells)")
        args.notebooks = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "nbs").glob("*.ipynb"))
                          if not p.name.startswith("_") and any(c.cell_type == "code" and "gpu" in flags(c) for c in read_nb(p).cells)]
        print("notebooks with GPU cells: " + " ".join(args.notebooks))
    if args.out and len(args.notebooks) > 1: ap.error("--out takes one notebook")
    skip = (args.skip if args.skip is not None else ("slow" if args.gpu else "")).split()
    if len(args.notebooks) > 1:   # one process per notebook: a chapter re-running its export cells (the custom-op
        import subprocess         # registrations, say) must not change the package under the next chapter
        common = (["--gpu"] if args.gpu else []) + ["--skip", " ".join(skip)] + \
                 (["--benchmarks", args.benchmarks] if args.benchmarks else [])
        failed = [nb for nb in args.notebooks
                  if subprocess.run([sys.executable, __file__, nb, *common]).returncode != 0]
    else:
        failed = [nb for nb in args.notebooks
                  if execute(nb, args.out, args.gpu, skip, args.benchmarks) is not None]
    if failed: print("failed: " + " ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
