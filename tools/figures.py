#!/usr/bin/env python3
"""Check that every measured figure the README and the chapters' prose state is one that was measured.

Usage: python tools/figures.py --check | --list | --self-test

A *measured figure* is a number written with a unit of time, speed, memory or ratio, outside code: `141.3 µs`,
`3.85 ms`, `640 s`, `554 TFLOP/s`, `86.9 GiB`, `1,542 MiB`, `1.96×`, `+8.1%`, and both ends of a range such as
`20.93–44.23 ms` or `1.29–1.55×` (the unit written once, after the second end). A ratio is a number *joined* to
`×` (`10.40×`); `2 × 83.7` is a product, and `64 × 128` a shape. Numbers without a unit (shapes, head counts,
`top-512`, token counts, versions, dates, similarities such as `1.3e-05`) are not figures, and nothing inside code
is: fenced blocks, inline code spans and HTML comments are skipped. Nor is a bound or a product (a figure after
`=`, `≥`, `≤`, `<`, `>`, "at most", "at least": `≥ 95%`, `= 256 KiB`) or a setting (`a 256 MiB budget`).

`--check` reads `README.md` and the markdown cells of every notebook in `nbs/`, and fails (exit code 1, one line per
figure: file, cell, the figure and its sentence) on a figure that is in neither `BENCHMARKS.md` nor, for a notebook,
that notebook's own stored outputs (the text of every output of every cell: a GPU cell's stored run is its evidence).
A figure is found when one of those numbers, rounded half-up to as many decimals as the figure has, equals it: the
prose may round `3.85` to `3.9` or `141.3` to `141`, never change it. What a figure counts is not checked against the
unit of the column it came from: the check proves that the prose invents no number, not that it quotes the right one.

`CHANGELOG.md` is not checked: it is history, with the dates of its runs. The README's figures are filled from
`BENCHMARKS.md` by `tools/readme.py` (its `{{bench:...}}` placeholders), so they pass by construction; this check
is what keeps a hand-typed figure out of the chapters and out of the README's notebook.
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
_BOUND = re.compile(r"(?:[=≥≤<>]|\bat (?:most|least))\s*$")  # `≥ 95%`, `= 256 KiB`: a bound or a product, not a run
_SETTING = re.compile(r"\s*budget\b")  # `a 256 MiB budget`: a setting
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


def figures(text: str) -> list[tuple[int, str, list[str]]]:
    """The measured figures of the Markdown `text`: `(line, figure as written, [its numbers])`; a range gives both
    ends."""
    found, text = [], prose(text)
    for m in FIGURE.finditer(text):
        if _BOUND.search(text, max(0, m.start() - 12), m.start()) or _SETTING.match(text, m.end()):
            continue
        ends = [n for n in (m.group("a"), m.group("b")) if n]
        found.append((text.count("\n", 0, m.start()) + 1, m.group(0).strip(), ends))
    return found


def numbers(text: str) -> set[Decimal]:
    "Every decimal number written in `text` (thousands separators dropped)."
    return {Decimal(n.replace(",", "")) for n in _NUMBER.findall(text)}


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


def unmeasured(text: str, pool: set[Decimal], where: str) -> list[str]:
    "One line per figure of `text` none of whose numbers is in `pool`: `where:line: figure — the line's text`."
    lines = text.split("\n")
    bad = []
    for n, fig, nums in figures(text):
        missing = [x for x in nums if not found(x, pool)]
        if missing:
            bad.append(f"{where}:{n}: {fig!r} is not in BENCHMARKS.md — {lines[n - 1].strip()[:160]}")
    return bad


def check(root: Path = ROOT) -> list[str]:
    "Every unmeasured figure of `root`'s README.md and notebooks' markdown cells (`unmeasured` lines)."
    bench = numbers((root / "BENCHMARKS.md").read_text(encoding="utf-8"))
    bad = unmeasured((root / "README.md").read_text(encoding="utf-8"), bench, "README.md")
    for path in sorted((root / "nbs").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        pool = bench | numbers(outputs_text(nb))
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "markdown":
                bad += unmeasured(_src(cell), pool, f"nbs/{path.name} cell {i} ({cell.get('id')})")
    return bad


def self_test():
    "The rule on made-up text: what is a figure, what is not, what is found, and a wrong figure caught."
    text = (
        "A step takes 3.9 ms (8.9–10.8× HF eager; 1.27× at 4,096 tokens), 141 µs, 1,064 µs, +8.1%, 86.9 GiB.\n"
        "Not figures: top-512, H 64, 2 × 83.7, 64 × 128, 4,096 tokens, torch 2.11, 2026-12-04, 1.3e-05, v0.2.\n"
        "Nor bounds and settings: ≥ 95%, at most 2×, 4 · 64 = 256 KiB, a 256 MiB budget.\n"
        "Code is not prose: `12.5 ms`, <!-- 7 ms -->\n```\n99 ms\n```\n"
    )
    got = [f for _, f, _ in figures(text)]
    assert got == ["3.9 ms", "8.9–10.8×", "1.27×", "141 µs", "1,064 µs", "+8.1%", "86.9 GiB"], got
    assert figures("2 × 83.7 GiB") == [(1, "83.7 GiB", ["83.7"])]
    assert found("3.85", numbers("took 3.85."))  # a number that ends a sentence
    pool = numbers("| 3.85 | 141.3 | 1064.0 | 8.92 | 10.95 | +8.1% | 86.9 | 3.5e-07 |")
    assert not found("3.5", pool)  # a similarity's mantissa is no figure
    assert found("3.9", pool) and found("141", pool) and found("1,064", pool) and found("8.9", pool)
    assert not found("3.8", pool) and not found("140", pool) and not found("10.9", pool)
    bad = unmeasured(text, pool, "t")  # the deliberately wrong figures: a range of runs and an eager cost
    assert [b.split(": ")[1].split(" is not")[0] for b in bad] == ["'8.9–10.8×'", "'1.27×'"], bad
    assert bad[0].startswith("t:1: ") and "A step takes" in bad[0]
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
            for n, fig, _ in figures(text):
                print(f"{path.name}:{n}: {fig}")
        return 0
    if "--check" not in argv:
        print(__doc__.split("\n\n")[1])
        return 2
    bad = check()
    for b in bad:
        print(b)
    print(f"{len(bad)} measured figure(s) not in BENCHMARKS.md or the notebook's stored outputs" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
