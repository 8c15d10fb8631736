#!/usr/bin/env python3
"""Check that every measured figure the README and the chapters' prose state is one that was measured.

Usage: python tools/figures.py --check | --list | --self-test

A *measured figure* is a number written with a unit of time, speed, memory or ratio, outside code: `141.3 µs`,
`3.85 ms`, `640 s`, `554 TFLOP/s`, `86.9 GiB`, `1,542 MiB`, `1.96×`, `+8.1%`, and both ends of a range such as
`20.93–44.23 ms` or `1.29–1.55×` (the unit written once, after the second end). A ratio is a number *joined* to
`×` (`10.40×`); `2 × 83.7` is a product, and `64 × 128` a shape. Numbers without a unit (shapes, head counts,
`top-512`, token counts, versions, dates, similarities such as `1.3e-05`) are not figures, and nothing inside code
is: fenced blocks, inline code spans and HTML comments are skipped. Nor is a bound or a product (a figure after
`=`, `≥`, `≤`, `<`, `>`, "at most", "at least", "within", "under", "up to": `≥ 95%`, `= 256 KiB`, a goal
`within 5%`) or a setting (`a 256 MiB budget`, `8 GiB by default`); `ARITHMETIC` names the few sizes in the prose
that are computed from shapes or are constants of the code, each with its reason.

`--check` reads `README.md` and the markdown cells of every notebook in `nbs/`, and fails (exit code 1, one line per
figure: file, cell, the figure and its sentence) on a figure that is in neither `BENCHMARKS.md` nor, for a notebook,
that notebook's own stored outputs (the text of every output of every cell: a GPU cell's stored run is its evidence).
A figure is found when a number *of its unit* there, rounded half-up to as many decimals as the figure has, equals
it: the prose may round `3.85 ms` to `3.9 ms` or `141.3 µs` to `141 µs`, never change it. A number is of a unit when
it is written with it (`2.19 ms`), when it sits in a table column whose header names it (`fwd ms`, `peak GiB`,
`eager µs`), or when it is on a line that names the unit (`default_bwd_ms 2.08`, a printed line); a ratio (`×`) is
also found among the numbers of unit-less columns (`eager / graphed`, `vs bf16`). So `2 µs` is not found in the
`2` of a `ratio` column: what the check proves is that the prose invents no figure, not that it quotes the right row.

It also fails on a stored output that shows a section of `BENCHMARKS.md` from another run than the file's (its
`Run at commit …` line is not in the file): the chapters' evidence cells read the file when they run, so a GPU run
that rewrites it leaves them showing the run before until `python tools/execute_nb.py --cpu` runs them again.

`CHANGELOG.md` is not checked: it is history, with the dates of its runs. The README's figures are written from
`BENCHMARKS.md` by `tools/readme.py` (each marked in `nbs/index.ipynb` with the table cell it comes from), so they
pass by construction; this check is what keeps a hand-typed figure out of the chapters and out of the README.
"""

import json
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SP = "[ \u00a0\u2009\u202f]?"  # between a number and its unit: nothing, a space, a no-break or a thin space
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"  # 1,064.0 or 1064.0
_UNIT = r"TFLOP/s|TFLOPS|GB/s|TB/s|GiB|MiB|KiB|ms|µs|μs|us|ns|s|min|%"
FIGURE = re.compile(
    rf"(?<![\w.,/^·-])[+\-−]?(?P<a>{_NUM})(?:{_SP}[–-]{_SP}[+\-−]?(?P<b>{_NUM}))?"
    rf"(?:(?P<x>×)(?![ \u00a0]?\d)|{_SP}(?P<u>{_UNIT})(?![\w/]))"
)
_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\d|\.\d|e[-+]?\d)")
# (the lookahead: not the 3.5 of 3.5e-07)
# `≥ 95%`, `= 256 KiB`, `within 5%`: a bound, a product or a goal, not a run
_BOUND = re.compile(r"(?:[=≥≤<>]|\b(?:at most|at least|within|under|up to))\s*$")
_SETTING = re.compile(r"\s*(?:budget|by default)\b")  # `a 256 MiB budget`, `8 GiB by default`: a setting
# Sizes that are arithmetic on the shapes, or constants of the code, which no run measures: (notebook, figure) → why
ARITHMETIC = {
    ("00_layout.ipynb", "64 GiB"): "the scores sq²/4 · 4 B at 262,144 tokens",
    ("04_fused.ipynb", "64 GiB"): "the scores sq²/4 · 4 B at 262,144 tokens",
    ("07_bench_long.ipynb", "64 GiB"): "4 · H · 512 · 2 B per token at 262,144 tokens",
    ("00_layout.ipynb", "64 MiB"): "INDEX_CACHE_BYTES, a constant",
    ("00_layout.ipynb", "256 MiB"): "the query's gradient 4,096 · 64 · 512 · 2 B",
    ("01_reference.ipynb", "2.5 GiB"): "the gathered keys sq · K · D · 2 B",
    ("05_context_parallel.ipynb", "127 KiB"): "a halo's bytes from its shape",
}
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1|<!--.*?-->", re.S)  # inline code spans; HTML comments
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def prose(text: str) -> str:
    """`text` (Markdown) with everything that is code blanked out: fenced blocks, inline code, HTML comments, link
    targets. Lines are kept, so a figure's line number is its line in the file."""
    out, fence = [], None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence, line = m.group(1), ""
        elif fence is not None:
            run = m.group(1) if m else ""
            if run[:1] == fence[0] and len(run) >= len(fence) and not line.strip()[len(run) :]:
                fence = None
            line = ""
        out.append(line)
    text = _CODE.sub(lambda m: " " * len(m.group(0).split("\n")[0]) + "\n" * m.group(0).count("\n"), "\n".join(out))
    return re.sub(r"\]\([^)]*\)", "]", text)


def figures(text: str) -> list[tuple[int, str, list[str], str]]:
    """The measured figures of the Markdown `text`: `(line, figure as written, [its numbers], unit)`; a range gives
    both ends."""
    found, text = [], prose(text)
    for m in FIGURE.finditer(text):
        if _BOUND.search(text, max(0, m.start() - 12), m.start()) or _SETTING.match(text, m.end()):
            continue
        if m.group("u") in ("s", "min") and not text[m.end("b") if m.group("b") else m.end("a")].isspace():
            continue  # `0s`, `1s`: plurals of numbers; seconds are written `469 s`
        ends = [n for n in (m.group("a"), m.group("b")) if n]
        found.append((text.count("\n", 0, m.start()) + 1, m.group(0).strip(), ends, _unit(m.group("u"))))
    return found


_NOT_NUMBERS = re.compile(r"\d{4}-\d\d-\d\d|\d+(?:\.\d+){2,}\S*|\+cu\d+")  # dates, versions (2.11.0+cu130)


def numbers(text: str) -> set[Decimal]:
    "Every decimal number written in `text` (thousands separators dropped), but for dates and versions."
    return {Decimal(n.replace(",", "")) for n in _NUMBER.findall(_NOT_NUMBERS.sub(" ", text))}


_CANON = {"μs": "µs", "us": "µs", "TFLOPS": "TFLOP/s"}
_UNIT_WORD = re.compile(r"(?<![A-Za-z])(TFLOP/s|TFLOPS|GB/s|TB/s|GiB|MiB|KiB|ms|µs|μs|us|ns|%|×)(?![A-Za-z])")
_SECONDS_HEAD = re.compile(r"(?:^|\s)(s|min)$")  # a column of seconds: `s`, `wall s`


def _unit(u: str | None) -> str:
    return _CANON.get(u, u) if u else "×"


def _add_inline(text: str, pool: dict):
    "The figures written with their unit in `text` (`2.19 ms`, `15.0×`, `+8.1%`), into `pool[unit]`."
    for m in FIGURE.finditer(text):
        for n in (m.group("a"), m.group("b")):
            if n:
                pool.setdefault(_unit(m.group("u")), set()).add(Decimal(n.replace(",", "")))


def measured(text: str) -> dict[str, set[Decimal]]:
    """The numbers of `text` (a `BENCHMARKS.md`, a notebook's outputs) by unit (`"ms"`, `"µs"`, `"GiB"`, `"×"`, ...;
    `""`: a unit-less table column): written with the unit, in a table column whose header names it, or on a line that
    names it (see the module's docstring)."""
    pool: dict[str, set[Decimal]] = {}
    head = None  # the units of the current table's columns
    for line in text.split("\n"):
        if not line.lstrip().startswith("|"):
            head = None
            _add_inline(line, pool)
            for u in {_unit(w) for w in _UNIT_WORD.findall(line)}:
                pool.setdefault(u, set()).update(numbers(line))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if head is None:
            head = [
                {_unit(w) for w in _UNIT_WORD.findall(c)} | ({"s"} if _SECONDS_HEAD.search(c) else set()) or {""}
                for c in cells
            ]
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        for c, units in zip(cells, head):
            _add_inline(c, pool)
            for u in units:
                pool.setdefault(u, set()).update(numbers(c))
    return pool


def _merge(*pools: dict) -> dict:
    out: dict[str, set[Decimal]] = {}
    for p in pools:
        for u, v in p.items():
            out.setdefault(u, set()).update(v)
    return out


def found(figure: str, pool: set[Decimal]) -> bool:
    """Whether the number `figure` (as written: `3.9`, `1,064`) is one of `pool`'s rounded half-up to as many
    decimals as `figure` has."""
    v = Decimal(figure.replace(",", ""))
    q = Decimal(1).scaleb(v.as_tuple().exponent)
    return v in pool or any(p.quantize(q, rounding=ROUND_HALF_UP) == v for p in pool if p.as_tuple().exponent < 0)


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def outputs_text(nb: dict) -> str:
    "The text of every stored output of the notebook `nb` (streams, text/plain, text/markdown, text/html)."
    parts = []
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            parts.append(_src({"source": o.get("text", "")}))
            for kind in ("text/plain", "text/markdown", "text/html"):
                parts.append(_src({"source": o.get("data", {}).get(kind, "")}))
    return "\n".join(parts)


def unmeasured(text: str, pool: dict, where: str) -> list[str]:
    """One line per figure of `text` one of whose numbers is not among `pool`'s of its unit (`measured`):
    `where:line: figure — the line's text`."""
    lines = text.split("\n")
    bad = []
    for n, fig, nums, unit in figures(text):
        have = pool.get(unit, set()) | (pool.get("", set()) if unit == "×" else set())
        missing = [x for x in nums if not found(x, have)]
        if missing:
            bad.append(f"{where}:{n}: {fig!r} is not in BENCHMARKS.md — {lines[n - 1].strip()[:160]}")
    return bad


def stale_stamps(text: str, bench: str, where: str) -> list[str]:
    """One line per run line (`Run at commit …`, `bench.run_stamp`'s) in the stored outputs `text` that is not a line of
    `bench` (`BENCHMARKS.md`'s text): a chapter showing a section of an older run than the file's."""
    have = set(bench.split("\n"))
    runs = [line for line in text.split("\n") if line.startswith(("Run at commit `", "Run of fused_csa_nb "))]
    return [
        f"{where}: a stored output shows a section of another run than BENCHMARKS.md's ({r[:90]}…): "
        "python tools/execute_nb.py --cpu on the notebook refreshes it"
        for r in dict.fromkeys(runs)
        if r not in have
    ]


def check(root: Path = ROOT) -> list[str]:
    """Every unmeasured figure of `root`'s README.md and notebooks' markdown cells (`unmeasured` lines), and every
    stored output that shows an older run's section of `BENCHMARKS.md` (`stale_stamps`)."""
    bench_text = (root / "BENCHMARKS.md").read_text(encoding="utf-8")
    bench = measured(bench_text)
    bad = unmeasured((root / "README.md").read_text(encoding="utf-8"), bench, "README.md")
    for path in sorted((root / "nbs").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        bad += stale_stamps(outputs_text(nb), bench_text, f"nbs/{path.name}")
        pool = _merge(bench, measured(outputs_text(nb)))
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "markdown":
                found_bad = unmeasured(_src(cell), pool, f"nbs/{path.name} cell {i} ({cell.get('id')})")
                bad += [b for b in found_bad if (path.name, b.split(": '")[1].split("' is not")[0]) not in ARITHMETIC]
    return bad


def self_test():
    "The rule on made-up text: what is a figure, what is not, what is found, and a wrong figure caught."
    text = (
        "A step takes 3.9 ms (8.9–10.8× HF eager; 1.27× at 4,096 tokens), 141 µs, 1,064 µs, +8.1%, 86.9 GiB.\n"
        "Not figures: top-512, H 64, 2 × 83.7, 64 × 128, 4,096 tokens, torch 2.11, 2026-12-04, 1.3e-05, v0.2.\n"
        "Nor bounds and settings: ≥ 95%, at most 2×, 4 · 64 = 256 KiB, a 256 MiB budget.\n"
        "Code is not prose: `12.5 ms`, <!-- 7 ms -->\n```\n99 ms\n```\n"
    )
    got = [f for _, f, _, _ in figures(text)]
    assert got == ["3.9 ms", "8.9–10.8×", "1.27×", "141 µs", "1,064 µs", "+8.1%", "86.9 GiB"], got
    assert figures("2 × 83.7 GiB") == [(1, "83.7 GiB", ["83.7"], "GiB")]
    assert figures("within 5%, at most 2×, ≥ 95%, 8 GiB by default, with 0s") == []  # goals, bounds, settings
    assert found("3.85", numbers("took 3.85."))  # a number that ends a sentence
    assert not found("3.5", numbers("1 − sim 3.5e-07"))  # a similarity's mantissa is no figure
    assert numbers("Measured 2026-12-02, torch 2.11.0+cu130: 7 µs") == {Decimal(7)}  # nor a date or a version
    bench = (
        "Step: 3.85 ms.\n\n| ratio | call µs | eager / graphed | speed-up | peak GiB |\n|---|---|---|---|---|\n"
        "| 2 | 141.3 | 1.24 | 8.92× | 86.9 |\n| 4 | 1064.0 | 10.95 | 15.0× | 21.8 |\n\nbusy_ms 0.62, +8.1%\n"
    )
    pool = measured(bench)
    assert pool["ms"] >= {Decimal("3.85"), Decimal("0.62")} and Decimal("141.3") in pool["µs"], pool
    assert Decimal("1.24") in pool[""] and Decimal("8.92") in pool["×"] and Decimal("86.9") in pool["GiB"], pool
    assert found("3.9", pool["ms"]) and found("141", pool["µs"]) and found("1,064", pool["µs"])
    assert not found("3.8", pool["ms"]) and not found("140", pool["µs"]) and not found("10.9", pool[""])
    assert unmeasured("a 2 µs call, 1.2× the graphed step", pool, "t") == [
        "t:1: '2 µs' is not in BENCHMARKS.md — a 2 µs call, 1.2× the graphed step"
    ]  # the 2 of the ratio column is no µs; 1.2× is the unit-less column's 1.24
    bad = unmeasured(text, pool, "t")  # the deliberately wrong figures: a range of runs and an eager cost
    assert [b.split(": ")[1].split(" is not")[0] for b in bad] == ["'8.9–10.8×'", "'1.27×'"], bad
    assert bad[0].startswith("t:1: ") and "A step takes" in bad[0]
    md = "## Decoding\n\nRun at commit `abc1234`, 2026-12-05: `x`.\n"
    assert stale_stamps("Run at commit `abc1234`, 2026-12-05: `x`.\n| a |", md, "n") == []  # the file's run
    old = stale_stamps("Run at commit `0ld0000`, 2026-12-01: `x`.", md, "n")  # an older run's section, shown
    assert len(old) == 1 and old[0].startswith("n: a stored output shows") and "0ld0000" in old[0], old
    print("self-test passed")


def main(argv) -> int:
    if "--self-test" in argv:
        self_test()
        return 0
    if "--list" in argv:
        for path in [ROOT / "README.md", *sorted((ROOT / "nbs").glob("*.ipynb"))]:
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".ipynb":
                text = "\n".join(_src(c) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
            for n, fig, _, _ in figures(text):
                print(f"{path.name}:{n}: {fig}")
        return 0
    if "--check" not in argv:
        print(__doc__.split("\n\n")[1])
        return 2
    bad = check()
    for b in bad:
        print(b)
    print(
        f"{len(bad)} problem(s): figures not in BENCHMARKS.md or the notebook's outputs, or stale outputs"
        if bad
        else "ok"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
