#!/usr/bin/env python3
"""Run every notebook's tests with `nbdev_test`, one notebook per process, and print a tally.

Usage: python tools/run_tests.py [--workers N] [--flags "gpu slow"] [notebook ...]

A thin wrapper around `nbdev_test --path NB`: the same cells run (cells flagged `#| gpu` or
`#| slow` are skipped unless their flag is passed), but each notebook gets its own line, the
output of a failing notebook is shown, and the run ends with `N passed, M failed`. The exit code
is non-zero when any notebook fails or none ran.
"""
import argparse
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def notebooks(paths):
    if paths:
        return [Path(p).resolve() for p in paths]
    return sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))


def run_one(nb, flags):
    exe = shutil.which("nbdev_test") or str(Path(sys.executable).parent / "nbdev_test")
    cmd = [exe, "--path", str(nb), "--n_workers", "0"] + (["--flags", flags] if flags else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return nb, p.returncode, time.perf_counter() - t0, (p.stdout + p.stderr).strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="notebooks run at once (default 2)")
    ap.add_argument("--flags", default="", help='extra test flags, e.g. "gpu" or "gpu slow"')
    ap.add_argument("paths", nargs="*", help="notebooks to test (default: all in nbs/)")
    args = ap.parse_args(argv)
    nbs = notebooks(args.paths)
    passed = failed = 0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.workers)) as ex:
        for nb, rc, dt, out in ex.map(lambda n: run_one(n, args.flags), nbs):
            ok = rc == 0
            passed += ok; failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}  {nb.name:32s} {dt:7.1f} s", flush=True)
            if not ok:
                print("\n".join("      " + line for line in out.splitlines()[-60:]), flush=True)
    print(f"{len(nbs)} notebooks in {time.perf_counter() - t0:.0f} s (flags: {args.flags or 'none'})")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
