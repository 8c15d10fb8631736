#!/usr/bin/env python3
"""Write the CI section of `BENCHMARKS.md` from the log of one CI run.

Usage: python tools/ci_section.py CI_LOG [--out BENCHMARKS.md] [--date YYYY-MM-DD]

`.ci/run` prints the commit it checks (`commit abc1234`), a `=== step (Ns)` line as each step starts (N: seconds since
the run began), the test runner's tally (`N passed, M failed`) and `=== done (Ns)` at the end. From those lines this
script takes each step's seconds — the installs (up to the sync check), the tests (the README's test command) and the
site's build and check — and the notebooks the tests passed, and replaces the `## CI on` section of `--out` (the other
sections stay, as `fused-csa bench --out` leaves them). A log of a run that failed, or that lacks one of those lines,
is refused (exit code 1) with what is missing: a figure in the README comes only from a run that passed.
"""

import argparse
import datetime
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package of this checkout

HEADER = "## CI on a 2-core CPU machine"
STEPS = (  # (the row, the prefix of the step's `===` line, the prefix of the next step's): seconds between them
    ("install (venv, torch, the package with its dev extra)", "venv", "notebooks are clean"),
    ("tests (`python tools/run_tests.py`)", "tests:", "docs:"),
    ("docs (`python tools/docs.py --check`)", "docs:", "done"),
)


def parse(log: str) -> dict:
    """`{"commit", "steps": {row: seconds}, "notebooks"}` of a CI log's text; a `ValueError` naming what is missing or
    saying that the run failed."""
    starts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^=== (.+?) \((\d+)s\)$", log, re.M)}
    commit = re.search(r"^commit ([0-9a-f]{7,40})$", log, re.M)
    tally = re.findall(r"^(\d+) passed, (\d+) failed", log, re.M)
    missing = [
        f"the `=== {p}...` line" for _, a, b in STEPS for p in (a, b) if not any(s.startswith(p) for s in starts)
    ]
    missing += [] if commit else ["the `commit ...` line"]
    missing += [] if tally else ["the test runner's `N passed, M failed` line"]
    if missing:
        raise ValueError(f"the log lacks {', '.join(dict.fromkeys(missing))}: not a whole run of .ci/run")
    if tally[-1][1] != "0":
        raise ValueError(f"the run failed ({tally[-1][1]} notebooks failed): only a passing run's times are written")

    def at(prefix):
        return next(t for s, t in starts.items() if s.startswith(prefix))

    return {
        "commit": commit.group(1)[:7],
        "steps": {row: at(b) - at(a) for row, a, b in STEPS},
        "notebooks": int(tally[-1][0]),
    }


def section(run: dict, day: str) -> str:
    "The Markdown of the CI section for a parsed run."
    rows = [
        f"| {row} | {s} | {run['notebooks'] if row.startswith('tests') else '–'} |" for row, s in run["steps"].items()
    ]
    return "\n".join(
        [
            HEADER,
            "",
            f"Run at commit `{run['commit']}`, {day}: `bash .ci/run` on a clean clone on CI's kind of machine (2 CPU "
            "cores, otherwise idle), the wheels on local disk; seconds per step. Regenerate: "
            "`python tools/ci_section.py CI_LOG --out BENCHMARKS.md` from that run's log.",
            "",
            "| step | s | notebooks |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )


SAMPLE = """commit 0123abc
=== venv + torch (CPU build from local disk) + package with dev extra (0s)
=== notebooks are clean and the exported modules are in sync (71s)
=== tests: the README's test command (80s)
30 passed, 0 failed
=== docs: build _docs/ and check every page in headless Chromium (312s)
=== done (398s)
"""


def self_test():
    "The parser on a made-up log: the times between the steps, and the refusals."
    run = parse(SAMPLE)
    assert run == {"commit": "0123abc", "steps": dict(zip((r for r, _, _ in STEPS), (71, 232, 86))), "notebooks": 30}
    assert "| tests (`python tools/run_tests.py`) | 232 | 30 |" in section(run, "2026-01-01"), section(
        run, "2026-01-01"
    )
    assert_refused(
        parse,
        (SAMPLE.replace("30 passed, 0 failed", "29 passed, 1 failed"), "the run failed"),
        (SAMPLE.replace("=== done (398s)\n", ""), "the `=== done...` line"),
        (SAMPLE.replace("commit 0123abc\n", ""), "the `commit ...` line"),
    )
    print("ci_section self-test: ok")


def assert_refused(parse, *cases):
    "Each `(log, why)` of `cases` refused by `parse` with a `ValueError` that says `why` (the self-tests' refusals)."
    for bad, why in cases:
        try:
            parse(bad)
        except ValueError as e:
            assert why in str(e), (why, e)
        else:
            raise AssertionError(f"accepted a log without {why}")


def read_run(path: str, parse, tool: str):
    """`(parse(text of path), its day)`, the day the file's modification day; `None` after printing why the log was
    refused (`tool`: the script's name, in the message)."""
    log = Path(path)
    try:
        return parse(log.read_text(encoding="utf-8", errors="replace")), datetime.date.fromtimestamp(
            log.stat().st_mtime
        ).isoformat()
    except (OSError, ValueError) as e:
        print(f"{tool}: {path}: {e}", file=sys.stderr)
        return None


def main(argv=None) -> int:
    if argv is None and sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="the output of one `bash .ci/run` (or --self-test alone)")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"), help="the Markdown file to merge the section into")
    ap.add_argument("--date", default=None, help="the run's date (default: the log file's modification day)")
    args = ap.parse_args(argv)
    got = read_run(args.log, parse, "ci_section")
    if got is None:
        return 1
    run, day = got[0], args.date or got[1]
    from fused_csa_nb.cli import BENCH_SECTIONS, _write_section

    assert HEADER.startswith(BENCH_SECTIONS["ci"])
    _write_section(args.out, section(run, day), "ci")
    print(f"wrote {args.out}: CI at {run['commit']}, " + ", ".join(f"{s} s" for s in run["steps"].values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
