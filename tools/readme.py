#!/usr/bin/env python3
"""Render `nbs/index.ipynb` into `README.md` (the README is generated; edit the notebook).

Usage: python tools/readme.py [--check | --self-test]

Markdown cells are copied as they are, but for their measured figures; code cells become ```python blocks (cells
marked `#| hide` are left out and nbdev directives are dropped); text outputs that the notebook keeps follow their cell
in a plain block. With `--check` nothing is written and the exit code says whether README.md is up to date. CI runs it
and fails on any difference.

No measured number is typed into the notebook by hand: a figure is marked with the cell of a table of
`BENCHMARKS.md` it comes from, and this script writes that cell's text between the marks:

    <!--bench:HEADING|ROW|COLUMN-->141.3<!--/-->

`HEADING`: the start of the `## ` heading of the section (without `## `); `ROW`: `column=value` pairs joined by `;` that
pick one row of one of the section's tables (`=`: the cell equals the value; `^=`: it starts with it); `COLUMN`: the
header of the column to read, optionally followed by `#n`: the n-th number in the cell (`#1` of `40.07 (30.52–49.62)` is
`40.07`). `ROW` `@gpu` (any `COLUMN`) reads the GPU the section was measured on: `H200` of its line `Measured … on
NVIDIA H200 (sm_90)`, else of the file's lines before its first section. The marks are HTML comments, so the notebook's
page on the docs site shows the figure; the README gets the figure without its marks. `python tools/readme.py` refreshes
the figures in `nbs/index.ipynb` (the file is rewritten only when one changed), then renders the README; `--check`
writes nothing and fails when either is stale, as CI's no-diff step does. A mark that names no section, no table, no row
or several rows fails, naming itself: a figure never goes stale silently.
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOOTER = "\n<!-- Generated from nbs/index.ipynb by tools/readme.py: edit the notebook, not this file. -->\n"


def _src(cell):
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


MARK = re.compile(r"<!--bench:([^|>]+)\|([^|>]+)\|([^>]+?)-->(.*?)<!--/-->")


def _tables(block: str) -> list[list[list[str]]]:
    "The Markdown tables of `block`: each a list of rows (its header first, the separator dropped) of stripped cells."
    tables, cur = [], []
    for line in block.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                cur.append(cells)
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def _row_test(spec: str):
    "`[(column, op, value)]` of a ROW spec: `a=1;b^=x`."
    out = []
    for part in spec.split(";"):
        m = re.fullmatch(r"\s*(.+?)\s*(\^?=)\s*(.*?)\s*", part)
        if m is None:
            raise ValueError(f"row selector {part!r}: expected column=value or column^=prefix")
        out.append(m.groups())
    return out


def bench_value(text: str, heading: str, row: str, column: str) -> str:
    """The cell `column` of the row `row` picks in the section of `BENCHMARKS.md` (`text`) whose heading starts with
    `heading` (see the module's docstring); a `ValueError` naming what is missing or ambiguous."""
    want = f"<!--bench:{heading}|{row}|{column}-->"
    column, _, nth = column.partition("#")
    blocks = [b for b in re.split(r"(?m)^(?=## )", text) if b.startswith("## " + heading.strip())]
    if len(blocks) != 1:
        raise ValueError(f"{want}: {len(blocks)} sections of BENCHMARKS.md start with '## {heading.strip()}'")
    if row.strip() == "@gpu":  # the GPU the section was measured on: its own line, else the file's first lines
        pre = re.split(r"(?m)^## ", text)[0]
        names = set(re.findall(r"\bon NVIDIA (\w+)", blocks[0])) or set(re.findall(r"\bon NVIDIA (\w+)", pre))
        if len(names) != 1:
            raise ValueError(f"{want}: {len(names)} GPUs named ('on NVIDIA …') for its section (expected one)")
        return names.pop()
    tests, hits = _row_test(row), []
    for table in _tables(blocks[0]):
        head = table[0]
        if column.strip() not in head or any(c not in head for c, _, _ in tests):
            continue
        for r in table[1:]:
            cell = dict(zip(head, r))
            if all(cell.get(c) == v if op == "=" else cell.get(c, "").startswith(v) for c, op, v in tests):
                hits.append(cell[column.strip()])
    if len(hits) != 1:
        raise ValueError(f"{want}: {len(hits)} rows of its section's tables match (expected one)")
    if not nth:
        return hits[0]
    nums = re.findall(r"\d[\d,]*(?:\.\d+)?", hits[0])
    if not nth.isdigit() or not 1 <= int(nth) <= len(nums):
        raise ValueError(f"{want}: the cell {hits[0]!r} has no number #{nth}")
    return nums[int(nth) - 1]


def refresh(markdown: str, bench: str) -> str:
    "`markdown` with the figure between every pair of marks replaced by its cell of `bench` (BENCHMARKS.md's text)."
    value = lambda m: bench_value(bench, m[1], m[2], m[3])  # noqa: E731
    return MARK.sub(lambda m: f"<!--bench:{m[1]}|{m[2]}|{m[3]}-->{value(m)}<!--/-->", markdown)


def unmarked(markdown: str) -> str:
    "`markdown` with the marks of its figures removed (the figures kept): the README's text."
    return MARK.sub(lambda m: m[4], markdown)


def refresh_notebook(nb_path=ROOT / "nbs" / "index.ipynb", bench_path=ROOT / "BENCHMARKS.md", write=True) -> bool:
    """Refresh the marked figures of the notebook's markdown cells from `BENCHMARKS.md`; rewrite the notebook (nbdev's
    JSON layout) only when one changed, and only with `write`. Returns whether one changed."""
    text = Path(nb_path).read_text(encoding="utf-8")
    nb, bench = json.loads(text), Path(bench_path).read_text(encoding="utf-8")
    changed = False
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = _src(cell)
            starts = [line for line in src.split("\n") if line.lstrip().startswith("<!--bench:")]
            if starts:  # CommonMark: a line that starts with `<!--` opens an HTML block, and the paragraph ends there
                raise ValueError(f"{nb_path}: a marked figure starts a line (put a word before it): {starts[0][:80]}")
            new = refresh(src, bench)
            if new != src:
                lines = new.split("\n")
                cell["source"] = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
                changed = True
    if changed and write:
        Path(nb_path).write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return changed


def render(nb_path=ROOT / "nbs" / "index.ipynb", bench_path=ROOT / "BENCHMARKS.md"):
    nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    bench = Path(bench_path).read_text(encoding="utf-8")
    parts = []
    for cell in nb["cells"]:
        src = _src(cell).strip("\n")
        if cell["cell_type"] == "markdown":
            parts.append(unmarked(refresh(src, bench)))
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


def self_test():
    "The placeholders on a made-up BENCHMARKS.md: a cell, a number of a cell, and the failures that name themselves."
    bench = (
        "# B\n\n## Decoding (x)\n\nRun at commit `abc`.\n\n| ratio | way | call µs | range |\n|---|---|---|---|\n"
        "| 4 | bf16 | 141.3 | 40.07 (30.52–49.62) |\n| 4 | fp8 | 85.3 | 1 |\n\n"
        "## Other\n\n| ratio | call µs |\n|---|---|\n| 4 | 9 |\n"
    )
    m = "<!--bench:Decoding|ratio=4;way=fp8|call µs-->"
    assert refresh(f"a {m}99<!--/--> µs", bench) == f"a {m}85.3<!--/--> µs"  # a stale figure refreshed
    assert unmarked(refresh(f"a {m}<!--/--> µs", bench)) == "a 85.3 µs"  # the README's text
    two = "<!--bench:Decoding|way^=bf|range#1--><!--/--> / <!--bench:Decoding|way^=bf|range#3--><!--/-->"
    assert unmarked(refresh(two, bench)) == "40.07 / 49.62"
    gpu = "<!--bench:Decoding|@gpu|name--><!--/-->"
    assert unmarked(refresh(gpu, "Measured on NVIDIA H200 (sm_90).\n\n" + bench[4:])) == "H200"  # the file's line
    on_h100 = bench.replace("Run at commit", "Measured on NVIDIA H100 80GB HBM3 (sm_90). Run at commit")
    assert unmarked(refresh(gpu, "Measured on NVIDIA H200.\n" + on_h100)) == "H100"  # the section's own line first
    for bad, says in (
        (gpu, "0 GPUs named"),
        ("<!--bench:Decoding|ratio=4|call µs--><!--/-->", "2 rows"),
        ("<!--bench:Decoding|ratio=5|call µs--><!--/-->", "0 rows"),
        ("<!--bench:Nothing|ratio=4|call µs--><!--/-->", "0 sections"),
        ("<!--bench:Decoding|ratio=4;way=fp8|range#2--><!--/-->", "no number #2"),
    ):
        try:
            refresh(bad, bench)
        except ValueError as e:
            assert bad.split("--><")[0] + "-->" in str(e) and says in str(e), e
        else:
            raise AssertionError(f"{bad} was filled")
    print("self-test passed")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return 0
    readme = ROOT / "README.md"
    if "--check" in argv:
        stale = refresh_notebook(write=False)
        ok = not stale and readme.exists() and readme.read_text(encoding="utf-8") == render()
        print(
            "README.md and the figures of nbs/index.ipynb are up to date"
            if ok
            else "stale: run python tools/readme.py"
            + (" (nbs/index.ipynb's figures differ from BENCHMARKS.md)" if stale else "")
        )
        return 0 if ok else 1
    if refresh_notebook():
        print("nbs/index.ipynb: figures refreshed from BENCHMARKS.md")
    readme.write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
