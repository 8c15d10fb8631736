#!/usr/bin/env python3
"""Build the documentation site from the notebooks, offline, into `_docs/` (and check it in Chromium).

Usage: python tools/docs.py [--check] [--check-only] [--allow-missing-outputs] [--warn RULES]
                            [--reuse-proc] [--jobs N] [--nbs DIR] [--screenshots DIR]

1. Every notebook of `nbs/` (found by name, `_*` skipped) goes through nbdev's docs processing
   (`nbdev.processors.FilterDefaults`, the processors behind `nbdev_proc_nbs`: frontmatter,
   `show_doc` cells for exported names, executing import/export/show_doc/`#| exec_doc` cells,
   hiding `#| hide` and `#| export` cells) into `_proc/`. Each `show_doc` cell then gets an API
   entry built with `inspect` from the imported object (`tools/docs_api.py`: real annotations,
   dataclass/NamedTuple fields, methods under their class, a table of every parameter described
   from the docstring), and every public name (`__all__`) of the notebook's module without a
   `show_doc` cell gets one.
2. The processed notebooks are made ready for the generator in `_proc/docs/` (one per page, named like
   nbdev's: `00_layout.ipynb` -> `layout.ipynb` -> `layout.html`): the frontmatter becomes the page's
   title and lead, `$...$` / `$$...$$` become MathML (`latex2mathml`: no script), links into the published
   docs become links between the pages (or plain text where the anchor does not exist), API entries become
   HTML, `#|` directives become cell tags (`#| gpu` and `#| slow` are shown on the cell), and a cell that
   misses its output says so under it. The package's source files become pages in `_proc/docs/src/`
   with line anchors ("source" links point there). mkdocs-material + mkdocs-jupyter build the site from
   them (`tools/docs_assets/mkdocs.yml`; the `search` and `offline` plugins, the Web Worker shim shipped
   with the site): navigation, previous/next, search, table of contents, copy buttons, phone layout.
   `tools/docs_hooks.py` gives the table of contents the pages' own headings (API entries included),
   labels table cells with their column (`data-label`) and marks the tables a phone stacks into cards.
   No page loads anything from the network.
3. With `--check` (after the build) or `--check-only`, every page is opened in headless Chromium
   (`playwright` driving the system `chromium`, `$CHROMIUM` to override) at 1400 px and 390 px
   wide. It fails on
   * a console error, a request that is not `file:` or `data:`, an image that does not decode,
     an internal link to a missing page or anchor;
   * horizontal overflow of the document at either width (`scrollWidth > clientWidth`), and at 1400 px
     a table, figure, image or code block reaching past the page's text column;
   * at 390 px a table wider than the page that is not stacked into cards (the cards: below 600 px
     the table's rows are blocks, each cell labelled with its column header);
   * an output `<pre>` wider than its box without scrolling inside it, and output text that is a
     Markdown table (`|---|`: emit it with `IPython.display.Markdown` instead) [rule `raw-output`];
   * a public name (`__all__` of a module) without its anchor on the module's page (the name's
     slug, `csaconfig`; where two names share one, `KERNEL_LIMITS` and `kernel_limits`, the
     other name keeps its case), and an anchor twice on one page;
   * a source link whose target (line of a file in the checkout) does not exist;
   * a missing output [rule `missing-output`; `missing-gpu-output` for a `#| gpu` cell]: a shown code cell
     (not `#| hide`, not exported) whose last statement displays a value (an expression, not an assignment, import,
     def, other statement, call of `test_*`/`assert*`, call of a function the notebook or package defines
     without returning a value, or a line ending in `;`) and that has no stored output; and every
     shown `#| gpu` cell without a stored output (its output is the evidence of the last GPU run).
     Opt-out: the directive `#| no_output_ok` in the cell, optionally with a reason
     (`#| no_output_ok: asserts only`); the page then says under the cell that no output is
     stored by design, with the reason. A cell that misses its output gets a visible "output
     missing" note on the page, so a reader can tell a missing result from one never meant to be.
     CPU outputs are refreshed with `python tools/execute_nb.py --cpu`.
   The search box, a copy button and the chapter menu (phone width) are exercised on the index page.
   Stored outputs a reader should not get fail the `raw-output` rule too: a warning printed to
   stderr, a raw dict printed or displayed where a table or a sentence belongs, the repr of a
   tuple / list / dict holding tensors (`({'a': tensor([...], dtype=torch.float64)},)`) over 20 lines or
   with elided values (a few small tensors side by side are an example and pass), a text output of more
   than 120 lines.
   Screenshots of the index, bench, deterministic, decode, hf and sharding pages at both widths are written
   to `_docs/screenshots/` (the first screen), or to `--screenshots DIR` (whole pages).
   `--allow-missing-outputs` (development) reports the missing-output rule as warnings; `--warn RULES` does so
   for any comma-separated rules (`missing-output`, `missing-gpu-output`, `raw-output`, `raw-gpu-output`: the
   same in a `#| gpu` cell's stored output).

Exit code 0 when everything built (and checked) cleanly.
"""

import argparse
import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
from docs_api import EntryHTML, show_doc_target  # noqa: E402
from docs_api import slug  # noqa: E402

NBS, PROC, OUT = ROOT / "nbs", ROOT / "_proc", ROOT / "_docs"
PAGES = PROC / "docs"  # what the generator reads
ASSETS = TOOLS / "docs_assets"
_DIRECTIVE = re.compile(r"^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$")
SCREENSHOT_PAGES = {"index", "bench", "deterministic", "decode", "hf", "sharding"}
WIDTHS = (1400, 390)
RULES = ("missing-output", "missing-gpu-output", "raw-output", "raw-gpu-output")


def notebooks():
    "The notebooks of `nbs/`: the index first, then the chapters by file name."
    nbs = sorted(p for p in NBS.glob("*.ipynb") if not p.name.startswith(("_", ".")))
    return sorted(nbs, key=lambda p: (p.stem != "index", p.name))


def page_name(nb_path):
    "nbdev's page name: the notebook name without its number prefix (`04_fused.ipynb` -> `fused.html`)."
    return re.sub(r"^\d+[a-z]?_", "", Path(nb_path).stem) + ".html"


def _settings():
    import configparser

    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "settings.ini")
    return cfg["DEFAULT"]


def _text(x):
    return "".join(x) if isinstance(x, list) else (x or "")


def _read(p):
    return json.loads(Path(p).read_text(encoding="utf-8"))


def directives(src):
    "{directive: value} of a cell's `#|` lines (`#| gpu` -> {'gpu': ''}, `#| echo: false` -> {'echo': 'false'})."
    out = {}
    for line in src.splitlines():
        m = _DIRECTIVE.match(line)
        if m:
            out[m.group(1)] = m.group(2).strip().strip('"')
    return out


def default_exp(nb):
    "The module a notebook exports to (`#| default_exp layout` -> 'layout'), or None."
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            m = re.search(r"^\s*#\|\s*default_exp\s+([\w.]+)", _text(c["source"]), re.M)
            if m:
                return m.group(1)
    return None


# ---------------------------------------------------------------- 1. nbdev processing


def _process_one(src, dst, lib):
    "Run nbdev's docs processors and the API annotation on one notebook (in a worker); return an error text or None."
    os.chdir(ROOT)
    sys.path[:0] = [str(ROOT), str(TOOLS)]
    os.environ["IN_TEST"] = "1"  # as nbdev's serve_drv does
    import warnings
    from execnb.nbio import read_nb, write_nb
    from nbdev.processors import FilterDefaults
    import docs_api

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            nb = read_nb(src)
            FilterDefaults()(nb)
            notes = docs_api.annotate(nb, _read(src), lib)
            write_nb(nb, dst)
        except Exception as e:  # report every notebook, not just the first failure
            cause = f"\n  caused by {type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else ""
            return f"{e}{cause}"
    mixed = [
        str(w.message).split("\n---\n")[1].splitlines()[0] for w in caught if "imports and other code" in str(w.message)
    ]
    if mixed:
        return "cells mixing imports with other code (nbdev would execute them): " + "; ".join(mixed)
    if notes:
        return "API entries: " + "; ".join(notes)
    return None


def process(nbs, jobs, lib):
    "Process the notebooks in `jobs` worker processes (as `nbdev_proc_nbs` does); report every failure."
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    PROC.mkdir(exist_ok=True)
    for stale in PROC.glob("*.ipynb"):
        stale.unlink()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TOOLS), str(ROOT)] + [os.environ.get("PYTHONPATH", "")])
    import docs as this  # the workers find `_process_one` by module name

    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as ex:
        futs = [(nb, ex.submit(this._process_one, str(nb), str(PROC / nb.name), lib)) for nb in nbs]
        errors = {nb.name: f.result() for nb, f in futs if f.result()}
    for name, err in errors.items():
        print(f"FAIL nbdev processing {name}: {err}", file=sys.stderr)
    return not errors


# ---------------------------------------------------------------- outputs a cell should have

_NONE_METHODS = {
    "backward",
    "zero_grad",
    "step",
    "synchronize",
    "empty_cache",
    "close",
    "savefig",
    "append",
    "extend",
    "update",
    "clear",
    "sort",
    "reverse",
    "insert",
    "remove",
    "discard",
    "write",
    "set_printoptions",
    "use_deterministic_algorithms",
    "set_default_dtype",
    "set_num_threads",
    "manual_seed_all",
    "tight_layout",
    "run_cell",
    "exec",
}


def _returns_nothing(fn):
    "True if a function definition never returns a value (no `return x`, no `yield`)."

    class V(ast.NodeVisitor):
        value = False

        def visit_Return(self, n):
            self.value |= n.value is not None and not (isinstance(n.value, ast.Constant) and n.value.value is None)

        def visit_Yield(self, n):
            self.value = True

        visit_YieldFrom = visit_Yield

        def visit_FunctionDef(self, n):
            pass  # nested definitions return for themselves

        visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    v = V()
    for st in fn.body:
        v.visit(st)
    return not v.value


def _code(src):
    "A cell's Python without directive and magic lines."
    return "\n".join("" if re.match(r"^\s*(#\||[%!])", line) else line for line in src.splitlines())


def _none_value(sources):
    "({functions that never return a value}, {functions that may}) defined at the top of `sources`."
    out, has_value = set(), set()
    for s in sources:
        try:
            tree = ast.parse(s)
        except SyntaxError:
            continue
        for st in tree.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                (out if _returns_nothing(st) else has_value).add(st.name)
    return out, has_value


_LIB_NONE = {}


def none_functions(nb, lib_dir=None):
    "Names of the functions a notebook (and the package's modules) define that never return a value."
    out, has_value = _none_value([_code(_text(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"])
    if lib_dir:
        key = str(lib_dir)
        if key not in _LIB_NONE:
            _LIB_NONE[key] = _none_value([p.read_text(encoding="utf-8") for p in sorted(Path(lib_dir).glob("*.py"))])
        out, has_value = out | _LIB_NONE[key][0], has_value | _LIB_NONE[key][1]
    return out - has_value


def output_status(src, outputs, none_funcs):
    """What a shown code cell's outputs should be: (expected, missing, note, reason).

    `expected`: the cell displays something when run (its last statement is a displaying expression) or
    it is a `#| gpu` cell; `missing`: expected but no output stored and no `#| no_output_ok`; `note`: the
    text shown under the cell ('' when nothing is to be said)."""
    d = directives(src)
    gpu, has = "gpu" in d, bool(outputs)
    optout = "no_output_ok" in d
    reason = d.get("no_output_ok", "")
    code = _code(src)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = None
    setup = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if gpu and tree is not None and all(isinstance(st, setup) for st in tree.body):
        gpu = False  # imports, definitions
    expected = gpu
    last_line = next(
        (line for line in reversed(code.splitlines()) if line.strip() and not line.strip().startswith("#")), ""
    )
    if (
        tree is not None
        and tree.body
        and isinstance(tree.body[-1], ast.Expr)
        and not re.sub(r"#.*$", "", last_line).rstrip().endswith(";")
    ):
        v = tree.body[-1].value
        expected = True
        if isinstance(v, ast.Call):
            f = v.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if re.match(r"^(test_\w*|assert\w*)$", name):
                expected = gpu
            elif isinstance(f, ast.Name) and name in none_funcs:
                expected = gpu
            elif isinstance(f, ast.Attribute) and name in _NONE_METHODS:
                expected = gpu
        elif isinstance(v, ast.Constant) and v.value is None:
            expected = gpu
    missing = expected and not has and not optout
    if has:
        note = ""
    elif optout:
        note = "no output stored, by design" + (f": {reason}" if reason else "")
    elif missing:
        note = (
            "Output missing: this GPU cell's output was not stored from the last GPU run."
            if gpu
            else "Output missing: the notebook was saved without this cell's output."
        )
    else:
        note = ""
    return expected, missing, note, reason


def missing_outputs(nbs):
    "[(notebook, cell index, first line, note)] of the shown code cells that miss their output."
    out = []
    lib_dir = ROOT / _settings().get("lib_path", "fused_csa_nb")
    for nb_path in nbs:
        nb = _read(nb_path)
        nf = none_functions(nb, lib_dir)
        for i, c in enumerate(nb["cells"]):
            if c["cell_type"] != "code":
                continue
            src = _text(c["source"])
            d = directives(src)
            if {"hide", "export", "exports", "exporti", "default_exp"} & set(d) or d.get("echo") == "false":
                continue
            if show_doc_target(src) or not _code(src).strip():
                continue
            _, missing, note, _ = output_status(src, c.get("outputs", []), nf)
            if missing:
                first = next((line for line in _code(src).splitlines() if line.strip()), "")
                out.append((nb_path.name, i, first.strip()[:70], "gpu" if "gpu" in d else "cpu"))
    return out


RAW_LINES = 120  # a stored text output longer than this is a dump, not something a reader reads
# the repr of a container holding tensors: a tensor right after `(`, `[`, `{`, `,` or `:` (a tuple, a list, a dict's
# value, any nesting: `({'a': tensor([...], dtype=torch.float64)},)`) is a dump when it is longer than
# TENSOR_REPR_LINES or elides values (`...`): a few small tensors side by side are an example a reader reads
_TENSOR_IN_CONTAINER = re.compile(r"[\[({,:]\s*tensor\(")
TENSOR_REPR_LINES = 20


def _lines(text):
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def raw_outputs(nbs):
    """[(notebook, cell index, what, is a GPU cell)] of stored outputs a reader should not get: a warning printed to
    stderr, the repr of a tuple / list / dict holding tensors that is long (`TENSOR_REPR_LINES`) or elides values, a
    text output (stream, text/plain, text/markdown) of more than `RAW_LINES` lines, or a raw dict / list of dicts
    (`{'a': 1, ...}` printed or displayed) where a table or a sentence belongs."""
    out = []
    for nb_path in nbs:
        for i, c in enumerate(_read(nb_path)["cells"]):
            gpu = "gpu" in directives(_text(c.get("source", "")))
            for o in c.get("outputs", []):
                data = o.get("data", {})
                text = _text(o.get("text", "")) or _text(data.get("text/plain", ""))
                n_lines = max(_lines(text), _lines(_text(data.get("text/markdown", ""))))
                if o.get("name") == "stderr" and re.search(r"\w*Warning\b", text):
                    what = (
                        f"a warning in the output: {text.strip().splitlines()[0][:100]!r} "
                        "(fix its cause, or silence it where it is raised with a reason)"
                    )
                elif _TENSOR_IN_CONTAINER.search(text) and (n_lines > TENSOR_REPR_LINES or "..." in text):
                    what = (
                        f"the repr of a container of tensors in the output ({n_lines} lines"
                        f"{', values elided' if '...' in text else ''}): {text.strip()[:80]!r}"
                        " (show a table or a sentence)"
                    )
                elif n_lines > RAW_LINES:
                    what = f"an output of {n_lines} lines (over {RAW_LINES}): a dump"
                elif re.search(r"^\s*\[?\{'\w+': ", text, re.M) and "text/markdown" not in data:
                    what = f"a raw dict in the output: {text.strip()[:80]!r} (show a table or a sentence)"
                else:
                    continue
                out.append((nb_path.name, i, what, gpu))
    return out


# ---------------------------------------------------------------- 2. pages for the generator


def _lazy():
    "Imports of the build step (dev dependencies)."
    global mistune, yaml, highlight, PythonLexer, HtmlFormatter, convert_tex
    import mistune
    import yaml
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer
    from latex2mathml.converter import convert as convert_tex


def math_html(tex, display):
    try:
        return convert_tex(tex.strip(), display="block" if display else "inline")
    except Exception:
        return f'<code class="math">{html.escape(tex)}</code>'


# fenced code, code spans (any number of backticks), display math, inline math (Pandoc's rules: no space
# inside the dollars, no digit right after the closing one, no blank line inside)
_MATH_OR_CODE = re.compile(
    r"(?P<fence>^[ \t]*(?P<f>`{3,}|~{3,})[^\n]*\n.*?^[ \t]*(?P=f)[ \t]*$)"
    r"|(?P<span>(?<!`)(?P<t>`+)(?!`).+?(?<!`)(?P=t)(?!`))"
    r"|\$\$(?P<block>.+?)\$\$"
    r"|(?<![\\$\w])\$(?P<inl>[^\s$](?:[^$\n]|\n(?![ \t]*\n))*?)(?<![\s\\])\$(?![\w$])",
    re.S | re.M,
)


def with_mathml(text):
    "Markdown with its `$...$` / `$$...$$` as MathML (code spans and fences untouched)."

    def sub(m):
        if m.group("block") is not None:
            return "\n\n" + math_html(m.group("block"), True).replace("\n", " ") + "\n\n"
        if m.group("inl") is not None:
            return math_html(m.group("inl"), False).replace("\n", " ")
        return m.group(0)

    return _MATH_OR_CODE.sub(sub, text)


_ENV_PATH = re.compile(r"(?:/[^\s/:'\"]+)+/((?:site|dist)-packages)/")


class Site:
    "What the pages know about each other: titles, module pages, the anchors of API entries, source links."

    def __init__(self, nbs, settings):
        self.settings, self.lib = settings, settings.get("lib_name", "fused_csa_nb")
        base = settings.get("doc_host", "").rstrip("/") + "/" + settings.get("doc_baseurl", "").strip("/") + "/"
        self.base_url, self.pages, self.module_page, self.symbols, self.anchors = base, [], {}, {}, {}
        self.page_symbols = {}  # the names of each page: a page's own entries win over another page's
        for nb in nbs:
            proc, page = _read(PROC / nb.name), page_name(nb)
            fm = next((_text(c["source"]) for c in proc["cells"] if c["cell_type"] == "raw"), "")
            meta = (yaml.safe_load(fm.strip().strip("-")) or {}) if fm.startswith("---") else {}
            self.pages.append((nb, page, meta.get("title") or nb.stem, meta.get("description", "")))
            exp = default_exp(_read(nb))
            if exp:
                self.module_page[f"{self.lib}.{exp}"] = page
            anchors = self.anchors.setdefault(page, set())
            for c in proc["cells"]:
                e = c.get("metadata", {}).get("api")
                if not e:
                    continue
                for x in [e] + (e.get("members") or []):
                    anchors.add(x["anchor"])
                    if e["kind"] == "reexport":
                        continue
                    short = e.get("module", "").split(".")[-1]
                    for key in (x["name"], f"{short}.{x['name']}", f"{e.get('module', '')}.{x['name']}"):
                        self.symbols.setdefault(key, (f"{page}#{x['anchor']}", x["kind"]))
                        self.page_symbols.setdefault(page, {}).setdefault(key, (f"{page}#{x['anchor']}", x["kind"]))
        self.source_template = (os.environ.get("DOCS_SOURCE_URL") or settings.get("doc_source_url", "")).strip()
        self.current = None

    def url(self, name):
        "The page#anchor of a package name (`layout.window_topk_idxs(...)` too), its module's page, or None."
        m = re.match(r"^([A-Za-z_][\w.]*)(\(.*\))?$", name.strip())
        if not m:
            return None
        if m.group(1) in self.module_page:
            return self.module_page[m.group(1)]
        hit = self.page_symbols.get(self.current, {}).get(m.group(1)) or self.symbols.get(m.group(1))
        if not hit:
            return None
        return "#" + hit[0].split("#", 1)[1] if hit[0].startswith(self.current + "#") else hit[0]

    def kind_of(self, name):
        return (self.page_symbols.get(self.current, {}).get(name) or self.symbols.get(name) or (None, None))[1]

    def source(self, where):
        "(href, 'path:line') of a {path, line} source location."
        if not where:
            return None
        path, line = where["path"], where["line"]
        if self.source_template:
            s = self.settings
            url = self.source_template.format(
                git_url=s.get("git_url", "").rstrip("/"), branch=s.get("branch", "main"), path=path, line=line
            )
            if "{path}" not in self.source_template:
                url = url.rstrip("/") + f"/{path}#L{line}"
            return url, f"{path}:{line}"
        return f"src/{path}.html#__codelineno-0-{line}", f"{path}:{line}"

    def local_links(self, text):
        "Links into the published docs (nbdev's `add_links`) as links between the pages; text where the anchor is gone."

        def sub(m):
            page, _, frag = m.group(2).partition("#")
            page = page or self.current
            if page in self.anchors and (not frag or frag in self.anchors[page]):
                return f"[{m.group(1)}]({'' if page == self.current else page}{'#' + frag if frag else ''})"
            return m.group(1)

        text = re.sub(r"\]\(([^)\s]+)\)\{[^}\n]*\}", r"](\1)", text)  # drop Pandoc attributes {target=...}
        text = re.sub(r"\[([^\]]*)\]\(" + re.escape(self.base_url) + r"([^)\s]*)\)", sub, text)
        mods = "|".join(re.escape(m) for m in sorted(self.module_page, key=len, reverse=True))
        if mods:  # `fused_csa_nb.layout` alone in a code span: a link to its chapter
            text = re.sub(
                r"(?<![\[\w])`(" + mods + r")`(?!\]|\()",
                lambda m: f"[`{m.group(1)}`]({self.module_page[m.group(1)]})",
                text,
            )
        return text


def _docstring_md(site):
    "Markdown -> HTML for docstrings: backticked package names link to their entries; math as MathML."

    class R(mistune.HTMLRenderer):
        exclude = ()

        def codespan(self, text):
            code = f"<code>{html.escape(text)}</code>"
            url = None if text in self.exclude else site.url(text)
            return f'<a href="{html.escape(url)}">{code}</a>' if url else code

        def block_code(self, code, info=None):
            return f"<pre><code>{html.escape(code)}</code></pre>\n"

    r = R(escape=False)
    md = mistune.create_markdown(renderer=r, plugins=["table", "strikethrough"])

    def render(text, exclude=()):
        r.exclude = set(exclude)
        return md(with_mathml(site.local_links(text or "")))

    return render


def _code_html(code):
    return highlight(code, PythonLexer(), HtmlFormatter(cssclass="highlight api-signature"))


def _html_output(h):
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": h}}


def _tagged(cell, *tags):
    cell.setdefault("metadata", {}).setdefault("tags", []).extend(t for t in tags if t)
    return cell


def page_notebook(nb_path, site, index):
    "The processed notebook of `nb_path` as the generator reads it (see the module's docstring, step 2)."
    _, page, title, desc = site.pages[index]
    site.current = page
    proc, src = _read(PROC / nb_path.name), _read(nb_path)
    src_cells = {c.get("id"): c for c in src["cells"]}
    nf = none_functions(src, ROOT / site.settings.get("lib_path", site.lib))
    entry_html = EntryHTML(_docstring_md(site), site.url, site.kind_of, _code_html, site.source)
    head = f"# {title}" + (f"\n\n> {desc}" if desc else "")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": with_mathml(site.local_links(head))}]
    for cell in proc["cells"]:
        s = _text(cell.get("source"))
        if cell["cell_type"] == "raw" or "AUTOGENERATED! DO NOT EDIT" in s:
            continue
        if cell["cell_type"] == "markdown":
            cells.append({"cell_type": "markdown", "metadata": {}, "source": with_mathml(site.local_links(s))})
            continue
        entry = cell.get("metadata", {}).get("api")
        code = "\n".join(line for line in s.splitlines() if not _DIRECTIVE.match(line)).strip("\n")
        out = {"cell_type": "code", "metadata": {}, "source": code, "execution_count": None, "outputs": []}
        if entry:
            out["outputs"] = [_html_output(entry_html(entry))]
            cells.append(_tagged(out, "hide-input"))
            continue
        if show_doc_target(s):
            print(f"WARN {nb_path.name}: {show_doc_target(s)} has no API entry", file=sys.stderr)
        d = directives(s)
        outs = [] if d.get("output") == "false" else cell.get("outputs", [])
        show_src = bool(code) and d.get("echo") != "false"
        if not show_src and not outs:
            continue
        for o in outs:
            o = dict(o)
            if o.get("output_type") == "stream":  # another machine's install paths, shortened
                o["text"] = _ENV_PATH.sub(r"…/\1/", _text(o.get("text")))
            elif "text/markdown" in o.get("data", {}):  # its headings two levels down
                md = re.sub(
                    r"^(#{1,6})(?=\s)",
                    lambda m: "#" * min(6, len(m.group(1)) + 2),
                    _text(o["data"]["text/markdown"]),
                    flags=re.M,
                )
                o["data"] = {**o["data"], "text/markdown": with_mathml(md)}
            out["outputs"].append(o)
        orig = src_cells.get(cell.get("id"))
        osrc = _text(orig["source"]) if orig else s
        od = directives(osrc)
        _, missing, note, _ = output_status(osrc, (orig or cell).get("outputs", []), nf) if show_src else (0, 0, "", 0)
        if note:
            h = html.escape(note)
            out["outputs"].append(
                _html_output(f'<p class="cell-note{" missing" if missing else ""}" role="note">{h}</p>')
            )
        gpu = "gpu" in od and ("GPU cell · output of the last GPU run" if outs else "GPU cell")
        slow = "slow" in od and not gpu and "slow cell (skipped by the CPU tests)"
        cells.append(_tagged(out, "hide-input" if not show_src else "", gpu or "", slow or ""))
    for k, c in enumerate(cells):
        c["id"] = f"c{k}"
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def source_page(rel, site):
    "A source file of the package as a Markdown page with line anchors (`#__codelineno-0-29`)."
    text = (ROOT / rel).read_text(encoding="utf-8")
    fence = "`" * max(3, 1 + max((len(x) for x in re.findall(r"`+", text)), default=0))
    page = site.module_page.get(".".join(Path(rel).with_suffix("").parts))
    title = next((t for _, p, t, _ in site.pages if p == page), page)
    back = f"Documented in [{title}]({'../' * (len(Path(rel).parts))}{Path(page).stem}.ipynb).\n\n" if page else ""
    return (
        f"---\nsearch:\n  exclude: true\n---\n\n# `{rel}`\n\n{back}"
        f'{fence}python linenums="1"\n{text.rstrip()}\n{fence}\n'
    )


def write_pages(nbs, settings):
    "The generator's input in `_proc/docs/`, its settings in `_proc/mkdocs.yml` (chapters in order, the index first)."
    site = Site(nbs, settings)
    if PAGES.exists():
        shutil.rmtree(PAGES)
    (PAGES / "stylesheets").mkdir(parents=True)
    (PAGES / "javascripts").mkdir()
    nav = []
    for i, (nb, page, title, _) in enumerate(site.pages):
        name = Path(page).stem + ".ipynb"
        (PAGES / name).write_text(json.dumps(page_notebook(nb, site, i), ensure_ascii=False), encoding="utf-8")
        nav.append({re.sub(r"`([^`]*)`", r"\1", title) if i else "Home": name})
    if not site.source_template:
        lib_dir = ROOT / settings.get("lib_path", site.lib)
        for p in sorted(lib_dir.glob("*.py")):
            if not p.name.startswith("_"):  # the package's own index and __init__: no entries link there
                rel = p.relative_to(ROOT).as_posix()
                dst = PAGES / "src" / (rel + ".md")
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_text(source_page(rel, site), encoding="utf-8")
    shutil.copy(ASSETS / "extra.css", PAGES / "stylesheets" / "extra.css")
    shutil.copy(ASSETS / "iframe-worker.js", PAGES / "javascripts" / "iframe-worker.js")
    cfg = yaml.safe_load((ASSETS / "mkdocs.yml").read_text(encoding="utf-8"))
    cfg.update(
        site_name=settings.get("title", site.lib),
        site_description=settings.get("description", ""),
        docs_dir=str(PAGES),
        site_dir=str(OUT),
        nav=nav,
        not_in_nav="/src/",
        hooks=[str(TOOLS / "docs_hooks.py")],
    )
    for p in cfg["plugins"]:
        if isinstance(p, dict) and "mkdocs-jupyter" in p:
            p["mkdocs-jupyter"]["cache_dir"] = str(PROC / "cache")
    (PROC / "mkdocs.yml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return site


def build(jobs, reuse=False):
    _lazy()
    t0 = time.perf_counter()
    settings = _settings()
    nbs = notebooks()
    if reuse:
        nbs = [nb for nb in nbs if (PROC / nb.name).exists()]
    elif not process(nbs, jobs, settings.get("lib_name", "fused_csa_nb")):
        return False
    t1 = time.perf_counter()
    write_pages(nbs, settings)
    t2 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--clean", "-f", str(PROC / "mkdocs.yml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # the generator's own notice about its future, every build
    )
    for line in r.stderr.splitlines() + r.stdout.splitlines():
        if not line.startswith("INFO") and line.strip():
            print(f"  mkdocs: {line}", file=sys.stderr)
    if r.returncode:
        print(f"FAIL: mkdocs build exited {r.returncode}", file=sys.stderr)
        return False
    print(
        f"docs: {len(nbs)} pages in {OUT.relative_to(ROOT) if OUT.is_relative_to(ROOT) else OUT}/ (nbdev processing "
        f"{t1 - t0:.0f} s, notebook pages {t2 - t1:.1f} s, mkdocs {time.perf_counter() - t2:.1f} s)"
    )
    return True


# ---------------------------------------------------------------- 3. browser check

LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-default-browser-check",
]

PAGE_INFO = """(width) => {
  const de = document.documentElement;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).slice(0, 2).join('.') : '');
  const scrolls = el => {
    const o = getComputedStyle(el).overflowX;
    return o === 'auto' || o === 'scroll' || o === 'hidden';
  };
  const overflowing = () => {
    if (de.scrollWidth <= de.clientWidth) return null;
    const w = de.clientWidth, hits = [];
    for (const el of document.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.right > w + 1 && r.width > 0) {
        let p = el.parentElement, inside = false;
        while (p && p !== document.body) { if (scrolls(p)) { inside = true; break; } p = p.parentElement; }
        if (!inside) hits.push(name(el) + ' (right edge ' + Math.round(r.right) + ' px)');
      }
      if (hits.length >= 3) break;
    }
    return {scroll: de.scrollWidth, client: de.clientWidth, culprits: hits};
  };
  const article = document.querySelector('.md-content__inner') || document.body;
  const right = article.getBoundingClientRect().right;
  // tables: at a phone's width each fits its page or is stacked into cards; at a desktop's each fits
  const tables = [];
  for (const t of article.querySelectorAll('table')) {
    const r = t.getBoundingClientRect();
    if (!r.width) continue;
    const fits = r.right <= right + 1 && t.scrollWidth <= t.clientWidth + 1;
    const tr = t.querySelector('tr');
    const stacked = !!tr && getComputedStyle(tr).display === 'block';
    if (!fits && !(width < 600 && stacked))
      tables.push((t.querySelector('th, td') || t).textContent.trim().slice(0, 40) + ' (' + Math.round(t.scrollWidth) +
                  ' px in ' + Math.round(Math.min(t.clientWidth, right - r.left)) + ' px)');
  }
  // figures, images and code blocks past the text column, without a box that scrolls them
  const past = [];
  for (const el of article.querySelectorAll('img, svg, figure, pre, math, .highlight')) {
    const r = el.getBoundingClientRect();
    if (!r.width || r.right <= right + 1) continue;
    let p = el.parentElement, held = false;
    while (p && p !== article) { if (scrolls(p) && p.getBoundingClientRect().right <= right + 1) { held = true; break; }
                                 p = p.parentElement; }
    if (!held) past.push(name(el) + ' (right edge ' + Math.round(r.right) + ' px > ' + Math.round(right) + ')');
  }
  const mdTable = /^\\s*\\|?\\s*:?-{3,}:?\\s*(\\|\\s*:?-{3,}:?\\s*)+\\|?\\s*$/m;
  const wide = [], rawTables = [];
  for (const p of document.querySelectorAll('.jp-OutputArea-output pre')) {
    const o = getComputedStyle(p).overflowX, box = p.getBoundingClientRect();
    if ((p.scrollWidth > p.clientWidth + 1 && !(o === 'auto' || o === 'scroll')) || box.right > right + 1)
      wide.push(p.textContent.slice(0, 60));
    if (mdTable.test(p.textContent)) rawTables.push(p.textContent.trim().split('\\n')[0].slice(0, 70));
  }
  return {
    bad_images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                                    .map(i => (i.getAttribute('src') || '').slice(0, 80)),
    n_images: document.images.length,
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    sources: [...document.querySelectorAll('a.api-source')].map(a => [a.getAttribute('href'), a.dataset.source]),
    resources: performance.getEntriesByType('resource').map(e => e.name),
    overflow: overflowing(), wide_pre: wide, md_tables: rawTables, tables: tables, past: past,
  };
}"""


def _index_letters() -> str:
    "The letters a word of the site's search index starts with (`_docs/search/search_index.json`)."
    docs = json.loads((OUT / "search" / "search_index.json").read_text())["docs"]
    text = " ".join(d.get("title", "") + " " + d.get("text", "") for d in docs).lower()
    return "".join(sorted(set(re.findall(r"\b([a-z])", text))))


def _dead_letters(page) -> list:
    """A query of one letter offers results for every letter a word of the index starts with. One bad term can make
    the search (lunr) throw on every query sharing its first letter: `cu(0,` did for every query starting with c."""
    dead, items = [], "document.querySelectorAll('.md-search-result__item').length"
    for ch in _index_letters():
        page.fill("input.md-search__input", "")
        page.wait_for_function(f"() => {items} === 0", timeout=5000)
        page.keyboard.type(ch)
        try:
            page.wait_for_function(f"() => {items} > 0", timeout=5000)
        except Exception:
            dead.append(ch)
    if not dead:
        return []
    return [f"search offers nothing for queries starting with {''.join(dead)!r} (a term breaking the index?)"]


def _interactions(page):
    "The search box, a copy button and the chapter menu (at 390 px) work on the index page."
    problems = []
    page.click("input.md-search__input")
    page.keyboard.type("CSAConfig", delay=10)
    try:
        page.wait_for_selector(".md-search-result__item a", timeout=10000)
    except Exception:
        pass
    hrefs = page.eval_on_selector_all(".md-search-result__item a", "as => as.map(a => a.getAttribute('href'))")
    if not any(re.search(r"/config\.html(\?[^#]*)?(#csaconfig)?$", h) for h in hrefs):
        problems.append(f"search for 'CSAConfig' does not offer its API entry (results: {hrefs[:5]})")
    problems += _dead_letters(page)
    page.keyboard.press("Escape")
    button = page.locator("clipboard-copy").first
    if button.count():
        button.click()
        page.wait_for_timeout(100)
        text = page.evaluate("() => navigator.clipboard.readText().catch(() => null)")
        want = page.evaluate(
            "() => document.getElementById(document.querySelector('clipboard-copy').getAttribute('for')).textContent"
        )
        if text is not None and text.strip() != want.strip():
            problems.append(f"the copy button copied {str(text)[:40]!r}, not the cell's code")
        elif text is None and not page.is_visible("clipboard-copy .notice"):
            problems.append("the copy button did not copy (no clipboard, no notice)")
    else:
        problems.append("no copy button on the index page")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(50)
    side = "() => document.querySelector('.md-sidebar--primary').getBoundingClientRect().left"
    if page.evaluate(side) >= 0:
        problems.append("the chapter menu is in view at 390 px before its button is pressed")
    page.click("label.md-header__button[for='__drawer']")
    page.wait_for_timeout(400)
    if page.evaluate(side) < -1 or not page.is_visible(".md-sidebar--primary .md-nav__link"):
        problems.append("the menu button does not show the chapters at 390 px")
    page.click("label.md-overlay[for='__drawer']", force=True)
    return problems


def _visit(paths, exe, shots, full):
    """Open `paths` (pages of `_docs/`) in one headless Chromium at both widths (run in a worker).
    Returns ({page: ids}, [(page, href)], [(page, href, 'path:line')], [(rule or None, message)], [summary line])."""
    import tempfile
    from playwright.sync_api import sync_playwright

    ids, links, sources, found, lines = {}, [], [], [], []
    shots = Path(shots)
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=exe, headless=True, args=LAUNCH_ARGS, viewport={"width": WIDTHS[0], "height": 900}
        )
        page = ctx.new_page()
        log = []
        page.on(
            "console",
            lambda m: (
                log.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning") and (m.type == "error" or "Failed" in m.text)
                else None
            ),
        )
        page.on("pageerror", lambda e: log.append(f"page error: {e}"))
        page.on(
            "requestfailed",
            lambda r: (
                log.append(f"request failed: {r.url} ({r.failure})")
                if not r.url.startswith(("file:", "data:", "blob:"))
                else None
            ),
        )

        def route(r):
            if r.request.url.startswith(("file:", "data:", "blob:")):
                return r.continue_()
            log.append(f"request leaving the machine: {r.request.url}")
            return r.abort()

        ctx.route("**/*", route)
        for p in map(Path, paths):
            rel = p.relative_to(OUT).as_posix()
            top = p.parent == OUT
            log.clear()
            page.set_viewport_size({"width": WIDTHS[0], "height": 900})
            page.goto(p.as_uri(), wait_until="load")
            page.wait_for_timeout(30)
            info = page.evaluate(PAGE_INFO, WIDTHS[0])
            ids[rel] = set(info["ids"])
            seen = {}
            for i in info["ids"]:
                seen[i] = seen.get(i, 0) + 1
            for dup in sorted(i for i, k in seen.items() if k > 1):
                log.append(f"anchor #{dup} on the page twice")
            links += [(rel, h) for h in info["links"]]
            sources += [(rel, h, d) for h, d in info["sources"]]
            for u in info["resources"]:
                if not u.startswith(("file:", "data:", "blob:")):
                    log.append(f"resource not local: {u}")
            for src in info["bad_images"]:
                log.append(f"image not decoded: {src}")
            for t in info["wide_pre"]:
                found.append(("raw-output", f"{rel}: an output wider than the page that does not scroll: {t!r}"))
            for t in info["md_tables"]:
                what = "raw Markdown table text in an output (display it with IPython.display.Markdown)"
                found.append(("raw-output", f"{rel}: {what}: {t!r}"))
            for t in info["tables"]:
                log.append(f"at {WIDTHS[0]} px a table wider than the page: {t}")
            for t in info["past"]:
                log.append(f"at {WIDTHS[0]} px past the text column: {t}")
            overflow = {WIDTHS[0]: info["overflow"]}
            if p.stem in SCREENSHOT_PAGES and top:
                page.screenshot(path=str(shots / f"{p.stem}-{WIDTHS[0]}.png"), full_page=full)
            for w in WIDTHS[1:]:
                page.set_viewport_size({"width": w, "height": 844})
                if top:
                    page.reload(wait_until="load")  # laid out (and scripted) as a phone would
                page.wait_for_timeout(30)
                narrow = page.evaluate(PAGE_INFO, w)
                overflow[w] = narrow["overflow"]
                for t in narrow["tables"]:
                    log.append(f"at {w} px a table wider than the page and not stacked into cards: {t}")
                if p.stem in SCREENSHOT_PAGES and top:
                    page.screenshot(path=str(shots / f"{p.stem}-{w}.png"), full_page=full)
            for w, o in overflow.items():
                if o:
                    log.append(
                        f"horizontal overflow at {w} px: scrollWidth {o['scroll']} > clientWidth {o['client']}; "
                        f"widest: {', '.join(o['culprits']) or '?'}"
                    )
            if rel == "index.html":
                page.set_viewport_size({"width": WIDTHS[0], "height": 900})
                page.reload(wait_until="load")
                log += _interactions(page)
            found += [(None, f"{rel}: {m}") for m in dict.fromkeys(log)]
            if top:
                lines.append(
                    f"  {rel:24s} {len(info['links']):4d} links {info['n_images']:3d} images"
                    f"{'' if not log else '  ' + str(len(set(log))) + ' problem(s)'}"
                )
        ctx.close()
    return ids, links, sources, found, lines


def check(warn=(), nbs=None, shots=None, jobs=2):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("FAIL: no chromium found (apt-get install chromium, or set $CHROMIUM)", file=sys.stderr)
        return False
    pages = sorted(p for p in OUT.glob("*.html") if p.name != "404.html") + sorted((OUT / "src").rglob("*.html"))
    if not pages:
        print("FAIL: no pages in _docs/ (build first)", file=sys.stderr)
        return False
    problems, warnings, ids, links, sources = [], [], {}, [], []

    def rule(name, msg):
        (warnings if name in warn else problems).append(msg)

    full = shots is not None  # screenshots asked for: whole pages; the default: what a reader sees first
    shots = Path(shots) if shots else OUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    n = max(1, min(jobs, len(pages)))
    import docs as this  # the workers find `_visit` by module name

    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as ex:  # one Chromium each
        results = list(
            ex.map(
                this._visit, [[str(p) for p in pages[k::n]] for k in range(n)], [exe] * n, [str(shots)] * n, [full] * n
            )
        )
    lines = []
    for i, ln, src, found, summary in results:
        ids.update(i)
        links += ln
        sources += src
        lines += summary
        for name, msg in found:
            (problems.append(msg) if name is None else rule(name, msg))
    print("\n".join(sorted(lines)))
    print(f"  src/ {len([p for p in pages if p.parent != OUT])} source pages")
    for src, href in links:
        if re.match(r"^[a-z]+:", href):
            continue  # external anchors: not loaded, not checked
        path, _, frag = href.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(src), path)).replace(os.sep, "/") if path else src
        if target not in ids:
            if not (OUT / target).exists():
                problems.append(f"{src}: broken link {href} (no such page)")
            continue
        if frag and frag not in ids[target]:
            problems.append(f"{src}: broken link {href} (no anchor #{frag})")
    # source links: the file and line exist in this checkout
    line_counts = {}
    for src, href, data in sources:
        path, _, line = (data or "").rpartition(":")
        f = ROOT / path
        if not path or not f.is_file():
            problems.append(f"{src}: source link {href} names no file of the checkout ({path or data!r})")
            continue
        n = line_counts.setdefault(path, len(f.read_text(encoding="utf-8").splitlines()))
        if not line.isdigit() or not 1 <= int(line) <= n:
            problems.append(f"{src}: source link {href}: no line {line} in {path}")
    # every public name has its entry on its module's page
    settings = _settings()
    lib, lib_dir = settings.get("lib_name", "fused_csa_nb"), ROOT / settings.get("lib_path", "fused_csa_nb")
    module_page = {}
    for nb in nbs or notebooks():
        exp = default_exp(_read(nb))
        if exp:
            module_page[exp] = page_name(nb)
    n_names = 0
    for mod in sorted(lib_dir.glob("*.py")):
        if mod.stem.startswith("_"):
            continue
        names = _all_names(mod)
        if names is None:
            continue
        page = module_page.get(mod.stem)
        if page is None:
            problems.append(f"module {lib}.{mod.stem} has public names but no notebook page")
            continue
        for n in names:  # the anchor is the name's slug, or the name itself where two slugs collide
            n_names += 1
            if not {slug(n), n} & ids.get(page, set()):
                problems.append(f"{page}: no API entry (anchor #{slug(n)}) for {lib}.{mod.stem}.{n}")
    # outputs the notebooks should have stored
    miss = missing_outputs(nbs or notebooks())
    for nb, i, first, kind in miss:
        what = (
            "GPU cell without a stored output (python tools/execute_nb.py --gpu on the GPU, or #| no_output_ok)"
            if kind == "gpu"
            else "cell ending in an expression has no stored output (python tools/execute_nb.py --cpu)"
        )
        rule("missing-gpu-output" if kind == "gpu" else "missing-output", f"{nb}: cell {i} ({first!r}): {what}")
    for nb, i, what, gpu in raw_outputs(nbs or notebooks()):  # a GPU cell's output changes only on the GPU
        rule(
            "raw-gpu-output" if gpu else "raw-output",
            f"{nb}: cell {i}: {what}" + (" (run it on the GPU again)" if gpu else ""),
        )
    for m in warnings:
        print("WARN", m, file=sys.stderr)
    for m in problems:
        print("FAIL", m, file=sys.stderr)
    print(
        f"check: {len(pages)} pages, {len(links)} links, {len(sources)} source links, {n_names} public names; "
        f"{len(miss)} cells missing outputs; {len(problems)} problem(s), {len(warnings)} warning(s); "
        f"screenshots in {shots.relative_to(ROOT) if shots.is_relative_to(ROOT) else shots}/"
    )
    return not problems


def _all_names(path):
    "The `__all__` of a module file (read with ast), or None."
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return None
    for st in tree.body:
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in st.targets):
            try:
                return list(ast.literal_eval(st.value))
            except ValueError:
                return None
    return None


def main(argv=None):
    global NBS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="after building, check every page in headless Chromium")
    ap.add_argument("--check-only", action="store_true", help="check the pages already in _docs/ without building")
    ap.add_argument(
        "--allow-missing-outputs",
        action="store_true",
        help="report cells missing their outputs as warnings (development); the default fails on them",
    )
    ap.add_argument("--warn", default="", help=f"comma-separated check rules reported as warnings: {', '.join(RULES)}")
    ap.add_argument("--jobs", type=int, default=2, help="notebooks processed, pages checked at once (default 2)")
    ap.add_argument("--reuse-proc", action="store_true", help="render the notebooks already processed in _proc/")
    ap.add_argument("--nbs", default=None, help="the notebooks' folder (default: nbs_path of settings.ini)")
    ap.add_argument(
        "--screenshots",
        default=None,
        help="write whole-page screenshots here (default: the first screen, in _docs/screenshots)",
    )
    args = ap.parse_args(argv)
    NBS = Path(args.nbs).resolve() if args.nbs else ROOT / _settings().get("nbs_path", "nbs")
    warn = {w.strip() for w in args.warn.split(",") if w.strip()}
    if args.allow_missing_outputs:
        warn.update(("missing-output", "missing-gpu-output"))
    unknown = warn - set(RULES)
    if unknown:
        ap.error(f"unknown rule(s) {', '.join(sorted(unknown))}; rules: {', '.join(RULES)}")
    t0 = time.perf_counter()
    ok = True
    if not args.check_only:
        ok = build(args.jobs, args.reuse_proc)
    if ok and (args.check or args.check_only):
        ok = check(warn, shots=args.screenshots, jobs=args.jobs)
    print(f"docs: {'ok' if ok else 'FAILED'} in {time.perf_counter() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
