#!/usr/bin/env python3
"""Write the GPU suite's section of `BENCHMARKS.md` from the output of one stored run.

Usage: python tools/suite_section.py SUITE_LOG [TIMED_LOG] --commit SHA --gpu NAME [--out BENCHMARKS.md] [--date D]

`python tools/run_tests.py --flags gpu --store` prints a line per notebook as it ends (`[k/N] PASS  name  T s`), the
warm-up of the timed chapters (`warm-up: X s, then Y s waiting ...`), its wall time (`N notebooks in T s (flags: F)`)
and its tally (`N passed, M failed`). From those lines this script writes the section `## The GPU suite`: how long the
whole suite took, how many notebooks passed, the warm-up, and the slowest notebooks; the other sections stay.
A run too long for one call of a limited length is split in two on the same machine at the same commit
(`--part untimed`, then `--part timed`, whose wall-time lines say `part: ...`): pass both logs, in either order; the
section adds them up and names the two calls. `--commit` names the commit whose files ran (the runner does not print
it) and `--gpu` the GPU (`NVIDIA H200`). A log of a run that failed, or that lacks the wall-time or tally line, is
refused (exit code 1) with what is missing, as are two logs that are not the two parts of one run's flags: a figure in
the README comes only from a run that passed.
"""

import argparse
import re
import sys
from pathlib import Path

from ci_section import assert_refused, read_run  # the same refusals and log reading as the CI section's

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package of this checkout

HEADER = "## The GPU suite"


def parse(log: str) -> dict:
    """`{"notebooks", "passed", "wall_s", "flags", "calls", "warm_s", "wait_s", "slowest": [(name, s)]}` of a run's
    output (`calls`: `[(part, wall s)]`, the part `all`, `untimed` or `timed`); a `ValueError` naming what is missing
    or saying that the run failed."""
    wall = re.findall(r"^(\d+) notebooks in (\d+) s \(flags: ([^;)]*)(?:; part: (\w+))?\)", log, re.M)
    tally = re.findall(r"^(\d+) passed, (\d+) failed", log, re.M)
    missing = ([] if wall else ["the `N notebooks in T s (flags: ...)` line"]) + (
        [] if tally else ["the `N passed, M failed` line"]
    )
    if missing:
        raise ValueError(f"the log lacks {' and '.join(missing)}: not a whole run of tools/run_tests.py")
    if tally[-1][1] != "0":
        raise ValueError(f"the run failed ({tally[-1][1]} notebooks failed): only a passing run's times are written")
    warm = re.search(r"warm-up: ([\d.]+) s, then ([\d.]+) s waiting", log)
    passes = {m[0]: float(m[1]) for m in re.findall(r"\] PASS\s+(\S+\.ipynb)\s+([\d.]+) s", log)}
    return {
        "notebooks": int(wall[-1][0]),
        "passed": int(tally[-1][0]),
        "wall_s": int(wall[-1][1]),
        "flags": wall[-1][2],
        "calls": [(wall[-1][3] or "all", int(wall[-1][1]))],
        "warm_s": float(warm[1]) if warm else None,
        "wait_s": float(warm[2]) if warm else None,
        "slowest": sorted(passes.items(), key=lambda kv: -kv[1])[:5],
    }


def combine(runs: list) -> dict:
    """One run of the suite from `parse`d logs: a whole run (`part` `all`) alone, or its two parts (`untimed` and
    `timed`, the same flags) added up: notebooks, passes and wall times summed (the calls ran one after the other),
    the slowest notebooks of both, and no warm-up (the timed part runs alone: nothing compiles beside other
    notebooks, its kernels compile in its own cells). A `ValueError` for anything else."""
    parts = [part for r in runs for part, _ in r["calls"]]
    if parts == ["all"]:
        return runs[0]
    if sorted(parts) != ["timed", "untimed"]:
        raise ValueError(
            "pass one log of a whole run, or the two logs of `--part untimed` and `--part timed`; "
            f"got the parts {', '.join(parts)}"
        )
    if runs[0]["flags"] != runs[1]["flags"]:
        raise ValueError(f"the two parts ran with different flags: {runs[0]['flags']!r} and {runs[1]['flags']!r}")
    untimed, timed = sorted(runs, key=lambda r: r["calls"][0][0] == "timed")
    slowest = sorted(untimed["slowest"] + timed["slowest"], key=lambda kv: -kv[1])[:5]
    return {
        **{k: untimed[k] + timed[k] for k in ("notebooks", "passed", "wall_s")},
        "warm_s": None,
        "wait_s": None,
        "flags": untimed["flags"],
        "calls": untimed["calls"] + timed["calls"],
        "slowest": slowest,
    }


def section(run: dict, commit: str, gpu: str, day: str) -> str:
    "The Markdown of the GPU suite's section for a parsed run."
    slow = ", ".join(f"`{n}` {s:.0f} s" for n, s in run["slowest"])
    command = f"python tools/run_tests.py --flags {run['flags']} --store"
    if len(run["calls"]) == 1:
        title, how, logs = (
            f"in one call (`{command}`)",
            "the untimed chapters in parallel, the timing chapters last in one process",
            "SUITE_LOG",
        )
        warm = (
            "–"
            if run["warm_s"] is None
            else f"{run['warm_s']:.0f} s compiling, then {run['wait_s']:.0f} s waiting for the other notebooks"
        )
    else:
        warm = "none: a call of their own, compiling in their cells"
        walls = dict(run["calls"])
        title = f"in two calls (`{command} --part untimed`, then `--part timed`)"
        how = (
            f"the untimed chapters in parallel in the first call ({walls['untimed']} s), the timing chapters in one "
            f"process in the second ({walls['timed']} s), on the same machine"
        )
        logs = "UNTIMED_LOG TIMED_LOG"
    return "\n".join(
        [
            f"{HEADER} {title}",
            "",
            f"Run at commit `{commit}`, {day}, on {gpu}: every notebook with its `#| {run['flags']}` cells as the "
            f"test, {how} (README, *Developing*). "
            f"Regenerate: `python tools/suite_section.py {logs} --commit SHA --gpu NAME` from that run's output.",
            "",
            "| flags | notebooks | passed | wall s | timed chapters' warm-up |",
            "|---|---|---|---|---|",
            f"| {run['flags']} | {run['notebooks']} | {run['passed']} | {run['wall_s']} | {warm} |",
            "",
            f"The slowest notebooks (each in its own time, running alongside others): {slow}.",
            "",
        ]
    )


SAMPLE = """[1/3] START a.ipynb
[1/3] PASS  a.ipynb                  12.5 s
      warm-up: 89.4 s, then 109.5 s waiting for the other notebooks
[2/3] PASS  b.ipynb                 150.0 s
[3/3] PASS  c.ipynb                   3.0 s
3 notebooks in 391 s (flags: gpu); code cells not run, flagged #| slow: 7
3 passed, 0 failed
"""


def self_test():
    "The parser on a made-up log: the wall time, the warm-up, the slowest notebooks, and the refusals."
    run = parse(SAMPLE)
    assert (run["wall_s"], run["passed"], run["flags"], run["warm_s"]) == (391, 3, "gpu", 89.4), run
    assert [n for n, _ in run["slowest"]] == ["b.ipynb", "a.ipynb", "c.ipynb"]
    md = section(run, "0123abc", "NVIDIA H200", "2026-01-01")
    assert md.startswith(HEADER) and "| gpu | 3 | 3 | 391 | 89 s compiling, then 110 s waiting" in md, md
    assert "on NVIDIA H200:" in md  # readme.py's `@gpu` mark reads the GPU from this line
    assert_refused(
        parse,
        (SAMPLE.replace("3 passed, 0 failed", "2 passed, 1 failed"), "the run failed"),
        (SAMPLE.replace("3 notebooks in 391 s", "done"), "the `N notebooks in T s"),
        (SAMPLE.replace("3 passed, 0 failed\n", ""), "the `N passed, M failed` line"),
    )
    untimed = SAMPLE.replace("(flags: gpu)", "(flags: gpu; part: untimed)").replace(
        "      warm-up: 89.4 s, then 109.5 s waiting for the other notebooks\n", ""
    )
    timed = (
        "      warm-up: 0.0 s, then 0.0 s waiting for the other notebooks\n"
        "[1/1] PASS  t.ipynb  200.0 s\n"
        "1 notebooks in 240 s (flags: gpu; part: timed); code cells not run, flagged #| slow: 1\n"
        "1 passed, 0 failed\n"
    )
    both = combine([parse(timed), parse(untimed)])  # either order
    assert (both["notebooks"], both["passed"], both["wall_s"], both["calls"]) == (
        4,
        4,
        631,
        [("untimed", 391), ("timed", 240)],
    ), both
    assert [n for n, _ in both["slowest"]][:2] == ["t.ipynb", "b.ipynb"], both
    md = section(both, "0123abc", "NVIDIA H200", "2026-01-01")
    assert "in two calls" in md and "| gpu | 4 | 4 | 631 | none: a call of their own" in md, md
    assert "first call (391 s)" in md, md
    assert combine([run]) is run
    assert_refused(
        combine,
        ([parse(untimed)], "got the parts untimed"),
        ([run, parse(timed)], "got the parts all, timed"),
        ([parse(untimed), parse(timed.replace("flags: gpu;", "flags: gpu slow;"))], "different flags"),
    )
    print("suite_section self-test: ok")


def main(argv=None) -> int:
    if argv is None and sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "logs",
        nargs="+",
        help="the output of one `tools/run_tests.py --store` run, or of its two parts (or --self-test alone)",
    )
    ap.add_argument("--commit", required=True, help="the commit whose files ran")
    ap.add_argument("--gpu", required=True, help="the GPU it ran on, as `NVIDIA H200`")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"), help="the Markdown file to merge the section into")
    ap.add_argument("--date", default=None, help="the run's date (default: the log file's modification day)")
    args = ap.parse_args(argv)
    got = [read_run(log, parse, "suite_section") for log in args.logs]
    if None in got:
        return 1
    try:
        run = combine([r for r, _ in got])
    except ValueError as e:
        print(f"suite_section: {e}", file=sys.stderr)
        return 1
    day = args.date or max(d for _, d in got)
    if not re.fullmatch(r"[0-9a-f]{7,40}", args.commit) or not args.gpu.startswith("NVIDIA "):
        print("suite_section: --commit must be a hex SHA and --gpu start with 'NVIDIA '", file=sys.stderr)
        return 1
    from fused_csa_nb.cli import _replace_text, merge_section

    out = Path(args.out)
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    _replace_text(str(out), merge_section(old, section(run, args.commit[:7], args.gpu, day), HEADER))
    print(f"wrote {out}: the GPU suite at {args.commit[:7]}, {run['passed']} notebooks passed in {run['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
