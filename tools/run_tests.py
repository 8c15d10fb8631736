#!/usr/bin/env python3
"""Run every notebook's tests, one notebook per process, and print a tally.

Usage: python tools/run_tests.py [--workers N] [--flags "gpu slow"] [--store] [--isolate] [--part all|untimed|timed]
                                [--timings PATH] [--deadline S] [notebook ...]

Each notebook runs in a process of its own through `nbdev_test --path NB` (the cells flagged `#| gpu` or
`#| slow` are skipped unless their flag is passed). Whole lines only, each a notebook's: `[k/N] START` when
the k-th of N notebooks starts, `[k/N] PASS` or `FAIL` with its time when the k-th ends, and a `... running`
line every 30 s for each notebook still running; the output of a failing notebook is shown. The run ends
with a line counting the code cells skipped by their flags, then `N passed, M failed` (notebooks). The exit
code is non-zero when any notebook fails or none ran.

`--timings PATH` (with `--store`) records each cell's wall time there, and before its tally the run prints each
notebook's cell time and the slowest cells (`timings_summary`).

`--store` (with `--flags gpu`, on an SM90+ GPU): the notebooks with `#| gpu` cells run through
`tools/execute_nb.py --gpu` instead, which executes the same cells and also writes the outputs of the
`#| gpu` cells back into the notebooks — one run is the GPU test and the docs' GPU evidence — and the sections
of `BENCHMARKS.md` the chapters measure (their `benchmarks_md`: the main tables, packed sequences, decoding, decoding
through Hugging Face `generate`, and with `--flags "gpu slow"` long context up to 262,144 tokens) into that file (the
sections other runs wrote there are kept).

Notebooks whose GPU cells measure time (`TIMED` below) run after the others, one at a time, when `gpu`
is among the flags, so that no other notebook shares the GPU with their measurements. `--part untimed` / `--part
timed` runs only the ones or the others (a GPU run split over two calls of a limited length). With `--store` the
timed notebooks run one after another in one process (`run_together`): the cuDNN kernels they share are compiled
once, not once per notebook (cuDNN's DSA kernels have no compile cache across processes); after a failure the rest
run each in a process of its own. That process starts with the other notebooks and compiles those kernels while they
run (`tools/warm_kernels.py`), then waits for them to end before its first notebook (`--no-warm`: it starts after).
`--isolate` gives every notebook its own process.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# notebooks whose GPU cells time kernels
TIMED = {"07_bench.ipynb", "07_bench_decode.ipynb", "07_bench_long.ipynb", "10_hf.ipynb"}
# the longest notebooks (measured on one H200 with their GPU cells) start first, so that the pool ends together
LONGEST = [
    "06_attention.ipynb",
    "08_graphs.ipynb",
    "07_sharding.ipynb",
    "03_decode_kernels.ipynb",
    "03_kernels.ipynb",
    "04_fused.ipynb",
    "06_decode.ipynb",
    "04_deterministic.ipynb",
    "03_testing.ipynb",
]


def notebooks(paths):
    if paths:
        return [Path(p).resolve() for p in paths]
    return sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith("_"))


def test_flags():
    "The flags of settings.ini's `tst_flags`: cells carrying one of them run only when it is passed."
    cfg = ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return set(cfg["DEFAULT"].get("tst_flags", "").split())


def cell_flags(src):
    "The `#| flag` directives of a cell's leading lines."
    out = set()
    for line in src.splitlines():
        m = re.match(r"^\s*#\|\s*([\w-]+)\s*$", line)
        if m:
            out.add(m.group(1))
        elif line.strip() and not line.lstrip().startswith("#|"):
            break
    return out


def skipped_cells(nb, passed):
    "How many code cells of `nb` the test run skips: those with a test flag that was not passed."
    cells = json.loads(Path(nb).read_text(encoding="utf-8"))["cells"]
    off = test_flags() - set(passed)
    return sum(1 for c in cells if c["cell_type"] == "code" and cell_flags("".join(c["source"])) & off)


def has_gpu_cells(nb):
    cells = json.loads(Path(nb).read_text(encoding="utf-8"))["cells"]
    return any(c["cell_type"] == "code" and "gpu" in cell_flags("".join(c["source"])) for c in cells)


WARM = ROOT / "tools" / "warm_kernels.py"  # what the timed notebooks' process compiles while the others run
ENV = None  # the notebooks' environment: set in main (CPU threads shared among the workers)
HEARTBEAT = 30.0  # seconds between the `... running` lines of a notebook still running


class Progress:
    "The runner's lines: one write each, under a lock (never two notebooks' lines interleaved), counted `[k/N]`."

    def __init__(self, total):
        self.total, self.started, self.ended, self.running = total, 0, 0, {}
        self.lock, self.stop = threading.Lock(), threading.Event()

    def say(self, line):
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def start(self, nb):
        with self.lock:
            self.started += 1
            k, self.running[nb.name] = self.started, time.perf_counter()
        self.say(f"[{k}/{self.total}] START {nb.name}")

    def end(self, nb, ok, dt):
        with self.lock:
            self.ended += 1
            k = self.ended
            self.running.pop(nb.name, None)
        self.say(f"[{k}/{self.total}] {'PASS' if ok else 'FAIL'}  {nb.name:32s} {dt:7.1f} s")

    def beat(self):
        "Every `HEARTBEAT` s, a line per notebook still running, with its time so far (a thread; `stop` ends it)."
        while not self.stop.wait(HEARTBEAT):
            with self.lock:
                now, running = time.perf_counter(), sorted(self.running.items())
            for name, t in running:
                self.say(f"      ... {name} running for {now - t:.0f} s")


PROGRESS = None  # the run's `Progress`: set in main


def store_cmd(nbs, flags, extra=()):
    "The command that runs `nbs` with their GPU cells and stores those cells' outputs (`tools/execute_nb.py --gpu`)."
    skip = " ".join(sorted(test_flags() - set(flags.split())))
    return [
        sys.executable,
        str(ROOT / "tools" / "execute_nb.py"),
        *map(str, nbs),
        "--gpu",
        "--skip",
        skip,
        "--benchmarks",
        str(ROOT / "BENCHMARKS.md"),  # the sections the chapters measure land there
        *extra,
    ]


def refresh_evidence(env=None) -> str:
    """After a stored run: the notebooks whose CPU cells show sections of `BENCHMARKS.md` (they call
    `benchmarks_section`) run again on the CPU (`execute_nb.py --cpu`), so that they show the sections the run wrote;
    they read the file when they run, which is before their GPU cells write it. Returns the line to print."""
    shows = [nb for nb in notebooks([]) if "benchmarks_section(" in nb.read_text(encoding="utf-8")]
    cmd = [sys.executable, str(ROOT / "tools" / "execute_nb.py"), "--cpu", *map(str, shows)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    names = ", ".join(nb.name for nb in shows)
    if p.returncode:
        return f"refreshing the evidence cells of {names} FAILED:\n" + (p.stdout + p.stderr)[-2000:]
    return f"the evidence cells of {names} show the BENCHMARKS.md this run wrote (execute_nb.py --cpu)"


def run_one(nb, flags, store, extra=()):
    PROGRESS.start(nb)
    if store and has_gpu_cells(nb):
        cmd = store_cmd([nb], flags, extra)
    else:
        exe = shutil.which("nbdev_test") or str(Path(sys.executable).parent / "nbdev_test")
        cmd = [exe, "--path", str(nb), "--n_workers", "0"] + (["--flags", flags] if flags else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV)
    return nb, p.returncode, time.perf_counter() - t0, (p.stdout + p.stderr).strip()


def start_together(nbs, flags, extra=(), warm=None, gate=None):
    """The process of `run_together`, started (`execute_nb.py --one-process`). With `warm` (a script, `WARM`) and
    `gate` (a file path) it first compiles the kernels the notebooks share, then waits until `gate` exists before its
    first notebook: started while the other notebooks run, it compiles during their time, and measures only once
    `gate` says they have ended."""
    more = ["--one-process"] + (["--warm", str(warm)] if warm else []) + (["--gate", str(gate)] if gate else [])
    return subprocess.Popen(
        store_cmd(nbs, flags, [*extra, *more]),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )


def run_together(nbs, flags, extra=(), p=None):
    """The stored run's timed notebooks `nbs` one after another in one process (`execute_nb.py --one-process`), so
    that each reuses what the ones before it compiled and loaded (the cuDNN kernels, compiled anew in every process;
    the CUDA context; the imports). Yields `(nb, returncode, seconds, output)` as each ends, read from the process's
    `executing NAME` / `verdict NAME PASS|FAIL` lines. After a failure (which may leave the CUDA context unusable) or
    if the process dies, the notebooks it has not finished run again, each in a process of its own. `p`: the process,
    started already by `start_together` (else started here)."""
    by_name, done = {nb.name: nb for nb in nbs}, set()
    p = p or start_together(nbs, flags, extra)
    cur, t0, lines = None, 0.0, []
    for line in p.stdout:
        start = re.match(r"^executing (\S+)$", line.rstrip("\n"))
        verdict = re.match(r"^verdict (\S+) (PASS|FAIL)$", line.rstrip("\n"))
        if start and start.group(1) in by_name and cur is None:
            cur, t0, lines = by_name[start.group(1)], time.perf_counter(), []
            PROGRESS.start(cur)
        elif verdict and cur is not None and verdict.group(1) == cur.name:
            ok = verdict.group(2) == "PASS"
            done.add(cur.name)
            yield cur, 0 if ok else 1, time.perf_counter() - t0, "".join(lines).strip()
            cur = None
            if not ok:  # the next ones in fresh processes: a CUDA error stays with the process that met it
                p.kill()
                break
        else:
            lines.append(line)
            if line.startswith("warm-up:") or "of CUDA memory still allocated after it" in line:  # what it starts with
                PROGRESS.say("      " + line.rstrip("\n"))
    rc = p.wait()
    if cur is not None:  # the process ended inside a notebook
        done.add(cur.name)
        lines.append(f"the process ended (exit code {rc}) inside this notebook\n")
        yield cur, rc or 1, time.perf_counter() - t0, "".join(lines).strip()
    for nb in nbs:
        if nb.name not in done:
            yield run_one(nb, flags, True, extra)


def _scratch_nb(path, *cells):
    "A notebook of code cells at `path` (the self-test's)."
    nb = dict(metadata={}, nbformat=4, nbformat_minor=5, cells=[])
    for i, src in enumerate(cells):
        nb["cells"].append(
            dict(cell_type="code", execution_count=None, id=f"c{i}", metadata={}, outputs=[], source=src)
        )
    Path(path).write_text(json.dumps(nb), encoding="utf-8")
    return Path(path)


def self_test():
    """`run_together` on scratch notebooks (no GPU needed): one process for all when they pass, each its own
    namespace, the one before let go; after a failure, and after the process dies inside a notebook, the rest in
    fresh processes; started early (`start_together`), it warms up and runs nothing before its gate; and
    `timings_summary`."""
    global ENV, PROGRESS
    ENV, PROGRESS = dict(os.environ), Progress(9)
    PROGRESS.say = lambda line: None  # the verdicts are asserted, not printed
    with tempfile.TemporaryDirectory() as d:
        pid = f"import os; open({str(Path(d) / 'pids')!r}, 'a').write(f'{{__name__}} {{os.getpid()}}\\n')"

        def case(second):
            open(Path(d) / "pids", "w").close()
            nbs = [
                _scratch_nb(
                    Path(d) / "a.ipynb",
                    pid,
                    "import sys, weakref\nclass Big: pass\nleft_behind = Big()",
                    "sys.left_behind = weakref.ref(left_behind)",
                ),  # fmt: skip
                _scratch_nb(
                    Path(d) / "b.ipynb",
                    pid,
                    "import sys\nassert 'left_behind' not in globals()",
                    "assert sys.left_behind() is None  # a's namespace let go",
                    second,
                ),  # fmt: skip
                _scratch_nb(Path(d) / "c.ipynb", pid, "print('c ran')"),
            ]
            got = [(nb.name, rc) for nb, rc, _, _ in run_together(nbs, "gpu")]
            pids = [line.split()[1] for line in (Path(d) / "pids").read_text().splitlines()]
            return got, pids

        got, pids = case("x = 2")
        assert got == [("a.ipynb", 0), ("b.ipynb", 0), ("c.ipynb", 0)] and len(set(pids)) == 1, (got, pids)
        got, pids = case("assert False, 'b fails'")
        assert [rc == 0 for _, rc in got] == [True, False, True] and pids[1] == pids[0] != pids[2], (got, pids)
        got, pids = case("os._exit(3)")
        assert got == [("a.ipynb", 0), ("b.ipynb", 3), ("c.ipynb", 0)] and pids[1] == pids[0] != pids[2], (got, pids)
    with tempfile.TemporaryDirectory() as d:  # started early: it warms up, then waits for the gate
        said, ran, gate = [], Path(d) / "ran", Path(d) / "gate"
        PROGRESS.say = said.append
        (Path(d) / "warm.py").write_text("def warm():\n    return ['scratch piece: 0.0 s'], True\n", encoding="utf-8")
        nbs = [_scratch_nb(Path(d) / "w.ipynb", f"import time; open({str(ran)!r}, 'w').write(repr(time.time()))")]
        p = start_together(nbs, "gpu", (), Path(d) / "warm.py", gate)
        time.sleep(2.0)
        t_gate = time.time()
        gate.touch()
        got = [(nb.name, rc) for nb, rc, _, _ in run_together(nbs, "gpu", (), p)]
        assert got == [("w.ipynb", 0)] and float(ran.read_text()) >= t_gate, (got, said)
        assert "      warm-up: scratch piece: 0.0 s" in said, said
        (Path(d) / "warm.py").write_text("def warm():\n    return ['scratch piece: failed (RuntimeError: x)'], False\n")
        p = start_together(nbs, "gpu", (), Path(d) / "warm.py", gate)  # a failed warm-up: the notebook runs alone
        got = [(nb.name, rc) for nb, rc, _, _ in run_together(nbs, "gpu", (), p)]
        assert got == [("w.ipynb", 0)] and p.wait() == 3, (got, said)
        PROGRESS.say = lambda line: None
    with tempfile.TemporaryDirectory() as d:
        t = Path(d) / "t.tsv"
        t.write_text("a.ipynb\t3\tgpu\t2.50\nb.ipynb\t1\t-\t0.25\na.ipynb\t7\tgpu slow\t4.00\n", encoding="utf-8")
        lines = timings_summary(t, top=2).splitlines()
        assert lines[0] == "cell time by notebook (3 cells timed, 7 s):" and lines[1].split() == ["a.ipynb", "6.5", "s"]
        assert [ln.split()[:3] for ln in lines[-2:]] == [["a.ipynb", "cell", "7"], ["a.ipynb", "cell", "3"]], lines
    print("run_tests self-test: ok")


def timings_summary(path, top: int = 12) -> str:
    """The lines that end a run with `--timings`: each notebook's cell seconds summed, largest first, then the `top`
    slowest cells (`notebook cell-index flags seconds`), read from the file `execute_nb.py --timings` appends to (a
    line per cell: notebook, cell index, flags, seconds, tab-separated): where the suite's time went in this run."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        nb, cell, fl, s = line.split("\t")
        rows.append((nb, int(cell), fl, float(s)))
    by_nb = {}
    for nb, _, _, s in rows:
        by_nb[nb] = by_nb.get(nb, 0.0) + s
    out = [f"cell time by notebook ({len(rows)} cells timed, {sum(by_nb.values()):.0f} s):"]
    out += [f"  {nb:32s} {s:7.1f} s" for nb, s in sorted(by_nb.items(), key=lambda kv: -kv[1])]
    out.append(f"the {min(top, len(rows))} slowest cells:")
    out += [f"  {nb:32s} cell {c:3d}  {fl:12s} {s:7.1f} s" for nb, c, fl, s in sorted(rows, key=lambda r: -r[3])[:top]]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="notebooks run at once (default 2; with --flags gpu, "
        "half the CPU cores up to 8: the GPU notebooks wait on the device, not on the CPU)",
    )
    ap.add_argument("--flags", default="", help='extra test flags, e.g. "gpu" or "gpu slow"')
    ap.add_argument(
        "--store",
        action="store_true",
        help="with --flags gpu: write the outputs of the #| gpu cells "
        "back into the notebooks (tools/execute_nb.py --gpu)",
    )
    ap.add_argument(
        "--timings", default=None, help="with --store: append each cell's wall time to this file as it ends"
    )
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="with --store: seconds per notebook after which no "
        "further cell starts (the notebook fails; what ran is written)",
    )
    ap.add_argument(
        "--part",
        choices=("all", "untimed", "timed"),
        default="all",
        help="with --flags gpu: only the notebooks that time the GPU (TIMED, one at a time) or only the others "
        "(default all: the others, then the timed ones) — a run split over two calls of a limited length",
    )
    ap.add_argument(
        "--isolate",
        action="store_true",
        help="with --store: every notebook in a process of its own (by default the timed ones share one, "
        "one after another, so that each does not compile again what the ones before it compiled)",
    )
    ap.add_argument(
        "--no-warm",
        action="store_true",
        help="with --store: start the timed notebooks' process only after the others (by default it starts with them "
        "and compiles their shared kernels meanwhile, tools/warm_kernels.py, then waits for them to end)",
    )
    ap.add_argument(
        "--self-test", action="store_true", help="check the runner's one-process group on scratch notebooks"
    )
    ap.add_argument("paths", nargs="*", help="notebooks to test (default: all in nbs/)")
    args = ap.parse_args(argv)
    if args.self_test:
        self_test()
        return 0
    if args.store and "gpu" not in args.flags.split():
        ap.error("--store writes GPU outputs: pass --flags gpu too")
    flags = args.flags.split()
    if args.part != "all" and "gpu" not in flags:
        ap.error("--part splits a GPU run: pass --flags gpu too")
    nbs = [nb for nb in notebooks(args.paths) if args.part == "all" or (nb.name in TIMED) == (args.part == "timed")]
    if args.workers is None:
        args.workers = min(8, max(2, (os.cpu_count() or 2) // 2)) if "gpu" in flags else 2
    extra = (["--timings", args.timings] if args.timings else []) + (
        ["--deadline", str(args.deadline)] if args.deadline else []
    )
    global ENV
    ENV = dict(os.environ)
    if args.workers > 1 and "OMP_NUM_THREADS" not in ENV:  # torch in each worker would take every core
        ENV["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.workers))
    timed = [nb for nb in nbs if "gpu" in flags and nb.name in TIMED]
    rest = sorted(
        (nb for nb in nbs if nb not in timed),
        key=lambda nb: LONGEST.index(nb.name) if nb.name in LONGEST else len(LONGEST),
    )
    passed = failed = 0
    skipped = sum(skipped_cells(nb, flags) for nb in nbs)
    off = " ".join(f"#| {f}" for f in sorted(test_flags() - set(flags))) or "none"
    global PROGRESS
    PROGRESS = Progress(len(nbs))
    beat = threading.Thread(target=PROGRESS.beat, daemon=True)
    beat.start()
    t0 = time.perf_counter()

    def report(results):
        nonlocal passed, failed
        for nb, rc, dt, out in results:
            ok = rc == 0
            passed += ok
            failed += not ok
            PROGRESS.end(nb, ok, dt)
            if not ok:
                PROGRESS.say("\n".join("      " + line for line in out.splitlines()[-60:]))

    together = args.store and not args.isolate and len(timed) > 1
    early = gate = None
    if together and rest and not args.no_warm:  # the timed ones' process compiles their kernels during the others
        gate = Path(tempfile.mkdtemp(prefix="run_tests_")) / "others-ended"
        early = start_together(timed, args.flags, extra, WARM, gate)
    try:
        with ThreadPoolExecutor(max(1, args.workers)) as ex:  # each verdict as its notebook ends (a cut run keeps them)
            futures = [ex.submit(run_one, n, args.flags, args.store, extra) for n in rest]
            report(f.result() for f in as_completed(futures))
        if gate is not None:
            gate.touch()
        if together:
            report(run_together(timed, args.flags, extra, early))
        else:
            report(run_one(nb, args.flags, args.store, extra) for nb in timed)
    except BaseException:  # an interrupted run leaves no process of its own behind
        if early is not None:
            early.kill()
        raise
    finally:  # nor the gate's folder
        if gate is not None:
            shutil.rmtree(gate.parent, ignore_errors=True)
    if args.store and passed:
        PROGRESS.say(refresh_evidence(ENV))
    if args.timings and Path(args.timings).is_file():
        PROGRESS.say(timings_summary(args.timings))
    PROGRESS.stop.set()
    print(
        f"{len(nbs)} notebooks in {time.perf_counter() - t0:.0f} s (flags: {args.flags or 'none'}"
        + ("" if args.part == "all" else f"; part: {args.part}")
        + f"); code cells not run, flagged {off}: {skipped}"
    )
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
