#!/usr/bin/env python3
"""Execute notebooks and save their outputs for the docs (then `nbdev_clean` them).

Usage: python tools/execute_nb.py [NOTEBOOK ...] [--cpu | --gpu] [--skip FLAGS] [--jobs N | --one-process]
                                  [--out PATH] [--benchmarks PATH] [--timings PATH] [--deadline S]

The docs site does not run cells: a page shows the outputs its notebook was saved with. This
script refreshes them, in one of three modes:

* `--cpu`: the CPU outputs. Every notebook of `nbs/` (or only those named) runs on the CPU
  (`CUDA_VISIBLE_DEVICES` set empty), cells flagged `#| gpu` never run and those flagged
  `#| slow` only with `--skip gpu`. Every cell that ran gets its new outputs (none, if it printed
  nothing); the cells that did not run keep what the notebook had, so the stored outputs of the
  `#| gpu` cells (those of the last GPU run) survive untouched. Before a release, from the
  repository root:

      python tools/execute_nb.py --cpu            # every notebook, two at a time
      git diff --stat nbs/                        # the new CPU outputs, and nothing else

  The random generators (`random`, numpy's, torch's, which torch seeds at random on import) are
  seeded with 0 before the first cell, so running it twice gives the same notebooks apart from
  outputs that measure the machine (times); execution counts, memory addresses in reprs
  (`nbdev_clean`) and this machine's paths (the checkout's shown relative to it, installed
  packages as `.../site-packages/...`) do not appear in what is written. The docs check
  (`tools/docs.py --check`) then finds every CPU cell that displays a value with its output; a
  cell that displays nothing by design (its last call returns None) says so with
  `#| no_output_ok`.

* `--gpu`: the GPU evidence, on an SM90+ GPU. Every notebook with `#| gpu` cells (or only those
  named) runs with every cell (those flagged `#| slow` skipped unless `--skip ""`), but only the
  outputs of the `#| gpu` cells are written back: the other cells keep what the notebook had, so
  the diff is the GPU evidence and nothing else:

      python tools/execute_nb.py --gpu --benchmarks BENCHMARKS.md

* neither: the named notebooks run with every cell and every output is written.

With `--benchmarks`, the sections a notebook measured — its `benchmarks_md`, a dict from a section of
`BENCHMARKS.md` (`cli.BENCH_SECTIONS`: "main", "packed", "decode", "hf-decode", ...) to its Markdown, set by the bench
chapters' and the Hugging Face chapter's GPU cells — are merged into that Markdown file, each with the run's line under
its first heading (commit, date: `bench.run_stamp`), when every cell passed; the sections other runs wrote
there (CP, CI; long context when the slow cells did not run) are kept. A notebook stops at
its first failing cell (exit code 1), still writing what ran
(the cells after it keep their outputs); the next notebook is executed all the same. Several
notebooks run in separate processes, `--jobs` of them at once; with `--one-process`, one after another in this
process instead, each in a shell of its own (`execute_in_turn`): the notebooks that time the GPU run so in the stored
run (`tools/run_tests.py --store`), so that each does not pay again the start-up and the cuDNN kernel compiles of the
ones before it. `nbdev_clean` is applied to each written notebook (it keeps outputs: `clear_all = False` in
settings.ini).
"""

import argparse
import os
import re
import runpy
import signal
import sys
import time
from pathlib import Path

from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package from this checkout, installed or not


def flags(cell):
    "The test flags of a cell (`#| gpu`, `#| slow`, ...): its leading `#|` directive lines."
    out = set()
    for line in cell.source.splitlines():
        m = re.match(r"^\s*#\|\s*([\w-]+)\s*$", line)
        if m:
            out.add(m.group(1))
        elif line.strip() and not line.lstrip().startswith("#|"):
            break
    return out


def _no_eval(cell):
    "True for a cell marked `#| eval: false` (never run, as in nbdev's tests)."
    return any(re.match(r"^\s*#\|\s*eval\s*:\s*false\s*$", line) for line in cell.source.splitlines())


_ENV_PATH = re.compile(r"(?<![^\s'\"(])(?:/[^\s/:'\"]+)+/((?:site|dist)-packages)/")


def _local_paths(outputs):
    """Outputs without this machine's paths: the checkout's written relative to it, installed packages as
    `.../site-packages/...`, the standard library as `.../lib/python3.X/...`, the home as `~`."""
    import sysconfig

    root, home = str(ROOT) + os.sep, os.path.expanduser("~") + os.sep
    stdlib = sysconfig.get_paths()["stdlib"]

    def fix(t):
        if isinstance(t, list):
            return [fix(x) for x in t]
        if not isinstance(t, str):
            return t
        t = _ENV_PATH.sub(r".../\1/", t).replace(root, "").replace(str(ROOT), ".")
        t = t.replace(stdlib + os.sep, f".../{Path(stdlib).name}/")
        return t.replace(home, "~" + os.sep) if len(home) > 2 else t

    for o in outputs:
        if "text" in o:
            o["text"] = fix(o["text"])
        if "traceback" in o:
            o["traceback"] = fix(o["traceback"])
        for k, v in o.get("data", {}).items():
            if k.startswith("text"):
                o["data"][k] = fix(v)
    return outputs


class _Stopped(Exception):
    "Raised in the running cell when the process is told to stop (SIGTERM)."


def _stop(signum, frame):
    raise _Stopped("stopped from outside (SIGTERM)")


def execute(nb_path, out=None, mode=None, skip=(), benchmarks=None, timings=None, deadline=None):
    """Run the notebook's code cells in order; return the index of the failing cell or None.

    `mode`: `"gpu"` writes back only the outputs of `#| gpu` cells, `"cpu"` those of every cell that
    ran (cells skipped by `skip` keep theirs), `None` those of every cell. `timings`: a file each cell's wall time is
    appended to as it ends; `deadline`: seconds after which no further cell starts (the notebook counts as failed,
    and what ran is written). A SIGTERM stops the running cell, which keeps its old outputs; what ran is written."""
    nb_path = Path(nb_path).resolve()
    print(f"executing {nb_path.name}", flush=True)
    nb = read_nb(nb_path)
    cwd = os.getcwd()
    os.chdir(nb_path.parent)
    shell = CaptureShell()
    shell.run("%matplotlib inline")
    if mode == "cpu":  # torch seeds its default generator at random on import: unseeded cells would differ run to run
        shell.run(
            "import random as _r, numpy as _np, torch as _t\n_r.seed(0); _np.random.seed(0); _t.manual_seed(0)\n"
            "del _r, _np, _t"
        )
    failed, ran, skipped, late = None, 0, 0, []
    stop_at = time.monotonic() + deadline if deadline else None
    signal.signal(signal.SIGTERM, _stop)  # a run stopped from outside still writes what its cells gave
    try:
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or _no_eval(cell):
                continue
            if flags(cell) & set(skip):
                skipped += 1
                continue
            if stop_at is not None and time.monotonic() > stop_at:
                late.append(i)
                continue
            kept = cell.get("outputs", [])
            cell["outputs"] = []  # a cell that prints nothing now must not keep what it printed before
            t0 = time.perf_counter()
            shell.cell(cell)
            dt = time.perf_counter() - t0
            if timings is not None:
                with open(timings, "a", encoding="utf-8") as f:
                    f.write(f"{nb_path.name}\t{i}\t{' '.join(sorted(flags(cell))) or '-'}\t{dt:.2f}\n")
            ran += 1
            cell["outputs"] = _local_paths(cell.get("outputs", []))
            err = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
            if mode == "gpu" and "gpu" not in flags(cell):
                cell["outputs"] = kept  # only the GPU evidence changes
            if err and err.get("ename") == "_Stopped":
                cell["outputs"] = kept
                failed = i
                print(f"{nb_path.name}: stopped from outside in cell {i}", file=sys.stderr)
                break
            if err:
                if mode == "gpu":
                    cell["outputs"] = kept  # a traceback is no evidence: the last good run's stays
                failed = i
                print(f"{nb_path.name}: cell {i} failed: {err.get('ename')}: {err.get('evalue')}", file=sys.stderr)
                print("\n".join(err.get("traceback", [])), file=sys.stderr)
                break
    finally:
        os.chdir(cwd)
    if late:
        failed = late[0]
        print(
            f"{nb_path.name}: {len(late)} cells not run after the {deadline:.0f}-s deadline (from cell {late[0]})",
            file=sys.stderr,
        )
    dst = Path(out) if out else nb_path
    try:
        write_nb(nb, dst)
        _clean(dst)
        if benchmarks and failed is None:
            write_sections(benchmarks, shell.user_ns.get("benchmarks_md"), nb_path.name)
    finally:  # the namespace and the output cache let go, a refused section too: a next notebook gets the memory
        shell.reset(new_session=False)
    print(
        f"executed {nb_path.name}: {ran} code cells, {skipped} skipped by flags"
        + ("" if failed is None else f", stopped at cell {failed}"),
        flush=True,
    )
    return failed


def _free(name):
    """What the notebook `name` left behind in this process, given back: garbage collected, the CUDA cache emptied;
    a line says how much CUDA memory is still allocated (the caches of the package and of the kernel libraries), which
    the next notebook's peak-memory figures include as what was allocated before their step."""
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
        print(f"{name}: {torch.cuda.memory_allocated() / 2**20:.0f} MiB of CUDA memory still allocated after it")


def warm_then_wait(warm, gate):
    """Before `--one-process` runs its first notebook: the warm-up script `warm` (a path; its `warm()` returns a line
    per piece and whether every piece ran, `tools/warm_kernels.py`) compiles the kernels the notebooks share while the
    runner's other notebooks still run; then the process waits until the file `gate` exists (the runner writes it once
    they have ended), so that no notebook measures while another shares the GPU. Lines `warm-up: …` say what each
    took. Where a piece failed (it may have left the CUDA context unusable), the process ends with exit code 3 before
    any notebook, and the runner runs them each in a process of its own, as after a failed notebook."""
    t0 = time.perf_counter()
    if warm:
        try:
            lines, ok = runpy.run_path(warm, run_name="__warm__")["warm"]()
        except Exception as e:  # noqa: BLE001 — a failed warm-up costs only what it would have saved
            lines, ok = [f"{warm} failed ({type(e).__name__}: {e})"], False
        for line in lines:
            print(f"warm-up: {line}", flush=True)
        if not ok:
            print("warm-up: a piece failed: the notebooks run in processes of their own", flush=True)
            sys.exit(3)
        _free("the warm-up")
    t1 = time.perf_counter()
    while gate and not Path(gate).exists():
        time.sleep(0.2)
    print(
        f"warm-up: {t1 - t0:.1f} s, then {time.perf_counter() - t1:.1f} s waiting for the other notebooks", flush=True
    )


def execute_in_turn(notebooks, mode, skip, benchmarks=None, timings=None, deadline=None):
    """The `notebooks` one after another in this process (`--one-process`), each in a shell of its own; a line
    `verdict NAME PASS` or `verdict NAME FAIL` after each (an exception in one, writing its sections say, fails that
    one, and the next runs all the same). What the process keeps from one notebook to the next is what the package's
    modules and the kernel libraries cache: the cuDNN kernels compiled (`cute.compile`, which has no cache across
    processes), the Triton kernels loaded, the CUDA context. Returns the names that failed."""
    failed = []
    for nb in notebooks:
        try:
            ok = execute(nb, None, mode, skip, benchmarks, timings, deadline) is None
        except Exception as e:  # noqa: BLE001 — one notebook's failure is its own
            import traceback

            traceback.print_exc()
            print(f"{Path(nb).name}: {type(e).__name__}: {e}", file=sys.stderr)
            ok = False
        _free(Path(nb).name)
        print(f"verdict {Path(nb).name} {'PASS' if ok else 'FAIL'}", flush=True)
        if not ok:
            failed.append(nb)
    return failed


def write_sections(benchmarks, sections, name):
    """Merge the sections a notebook measured into the Markdown file `benchmarks` (`BENCHMARKS.md`): `sections` is
    the notebook's `benchmarks_md`, a dict from a section of `cli.BENCH_SECTIONS` (`"main"`, `"decode"`, ...) to its
    Markdown, or None (a notebook that measures none). Each gets the run's line under its first heading (commit,
    date, `name`'s GPU cells: `bench.run_stamp`), and replaces that section's blocks, as `fused-csa bench --out` does;
    the sections of other runs stay. A key that is no section, or a section with a heading it does not own, is a
    `ValueError` before anything is written."""
    if sections is None:
        return
    from fused_csa_nb.bench import run_stamp, stamp_section
    from fused_csa_nb.cli import BENCH_SECTIONS, _replace_text, merge_section

    if not isinstance(sections, dict) or not sections:
        raise TypeError(f"{name}: `benchmarks_md` must be a non-empty dict of section -> Markdown, got {sections!r}")
    unknown = sorted(set(sections) - set(BENCH_SECTIONS))
    if unknown:
        raise ValueError(
            f"{name}: `benchmarks_md` names no section of BENCHMARKS.md: {unknown} (of {list(BENCH_SECTIONS)})"
        )
    stamp = run_stamp(f"the GPU cells of nbs/{name}, stored by tools/execute_nb.py --gpu")  # run_tests --store too
    text = Path(benchmarks).read_text(encoding="utf-8") if Path(benchmarks).exists() else ""
    for key, md in sections.items():  # merged one after another in memory: all or nothing
        text = merge_section(text, stamp_section(md, stamp), BENCH_SECTIONS[key])
    _replace_text(benchmarks, text)
    print(f"wrote {benchmarks}: {', '.join(sections)}")


def _clean(path):
    "`nbdev_clean` one notebook (run from the repository root, so settings.ini applies)."
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        from nbdev.clean import nbdev_clean

        nbdev_clean.__wrapped__(fname=str(path))
    finally:
        os.chdir(cwd)


def _all_notebooks(gpu_only=False):
    nbs = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith(("_", ".")))
    if gpu_only:
        nbs = [p for p in nbs if any(c.cell_type == "code" and "gpu" in flags(c) for c in read_nb(p).cells)]
    return [str(p.relative_to(ROOT)) for p in nbs]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "notebooks", nargs="*", help="default: every notebook in nbs/ (with --gpu: those with `#| gpu` cells)"
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--cpu",
        action="store_true",
        help="run on the CPU, never `#| gpu` cells; write back the outputs "
        "of the cells that ran, keep the stored outputs of the others",
    )
    mode.add_argument("--gpu", action="store_true", help="write back only the outputs of `#| gpu` cells")
    ap.add_argument(
        "--skip",
        default=None,
        help='skip cells with these flags (default: "slow" with --gpu, '
        '"gpu slow" with --cpu, where "gpu" is always skipped; else none)',
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="notebooks executed at once, one process each "
        "(default: 2 with --cpu, else 1: GPU timings want the GPU to themselves)",
    )
    ap.add_argument(
        "--out", default=None, help="where to write the executed notebook (one notebook; default: in place)"
    )
    ap.add_argument(
        "--benchmarks", default=None, help="merge the sections the notebook measured (`benchmarks_md`) into this file"
    )
    ap.add_argument(
        "--timings", default=None, help="append each cell's wall time to this file (notebook, cell, flags, s)"
    )
    ap.add_argument(
        "--deadline", type=float, default=None, help="seconds per notebook after which no further cell starts"
    )
    ap.add_argument(
        "--warm",
        default=None,
        help="with --one-process: a script whose warm() compiles the notebooks' kernels first (tools/warm_kernels.py)",
    )
    ap.add_argument(
        "--gate", default=None, help="with --one-process: wait for this file before the first notebook (after --warm)"
    )
    ap.add_argument(
        "--one-process",
        action="store_true",
        help="run the notebooks one after another in this process (not one process each), so that each "
        "compiles only the kernels the ones before it did not: a `verdict NAME PASS|FAIL` line after each",
    )
    args = ap.parse_args(argv)
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch is imported (here or in a child)
    if not args.notebooks:
        if not (args.gpu or args.cpu):
            ap.error("name the notebooks (or pass --cpu or --gpu for all of them)")
        args.notebooks = _all_notebooks(gpu_only=args.gpu)
        print(("notebooks with GPU cells: " if args.gpu else "notebooks: ") + " ".join(args.notebooks))
    if args.out and len(args.notebooks) > 1:
        ap.error("--out takes one notebook")
    default_skip = "slow" if args.gpu else "gpu slow" if args.cpu else ""
    skip = (args.skip if args.skip is not None else default_skip).split()
    if args.cpu and "gpu" not in skip:
        skip.append("gpu")
    mode = "gpu" if args.gpu else "cpu" if args.cpu else None
    if args.one_process and args.out:
        ap.error("--one-process writes each notebook in place: drop --out")
    if (args.warm or args.gate) and not args.one_process:
        ap.error("--warm and --gate go with --one-process")
    if args.one_process:
        warm_then_wait(args.warm, args.gate)
        failed = execute_in_turn(args.notebooks, mode, skip, args.benchmarks, args.timings, args.deadline)
    elif len(args.notebooks) > 1:  # one process per notebook: a chapter re-running its export cells (the custom-op
        import subprocess  # registrations, say) must not change the package under the next chapter
        from concurrent.futures import ThreadPoolExecutor

        common = (
            (["--gpu"] if args.gpu else ["--cpu"] if args.cpu else [])
            + ["--skip", " ".join(skip)]
            + (["--benchmarks", args.benchmarks] if args.benchmarks else [])
            + (["--timings", args.timings] if args.timings else [])
            + (["--deadline", str(args.deadline)] if args.deadline else [])
        )

        def run(nb):
            return subprocess.run([sys.executable, __file__, nb, *common]).returncode

        with ThreadPoolExecutor(max(1, args.jobs or (2 if args.cpu else 1))) as ex:
            failed = [nb for nb, rc in zip(args.notebooks, ex.map(run, args.notebooks)) if rc != 0]
    else:
        failed = [
            nb
            for nb in args.notebooks
            if execute(nb, args.out, mode, skip, args.benchmarks, args.timings, args.deadline) is not None
        ]
    if failed:
        print("failed: " + " ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
