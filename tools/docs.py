#!/usr/bin/env python3
"""Build the documentation site from the notebooks, offline, into `_docs/` (and check it in Chromium).

Usage: python tools/docs.py [--check] [--check-only] [--allow-missing-outputs] [--warn RULES]
                            [--reuse-proc] [--jobs N] [--nbs DIR]

1. Every notebook of `nbs/` (found by name, `_*` skipped) goes through nbdev's docs processing
   (`nbdev.processors.FilterDefaults`, the processors behind `nbdev_proc_nbs`: frontmatter,
   `show_doc` cells for exported names, executing import/export/show_doc/`#| exec_doc` cells,
   hiding `#| hide` and `#| export` cells) into `_proc/`. Each `show_doc` cell then gets an API
   entry built with `inspect` from the imported object (`tools/docs_api.py`: real annotations,
   dataclass/NamedTuple fields, methods under their class, a parameter table from the docstring),
   and every public name (`__all__`) of the notebook's module without a `show_doc` cell gets one.
   nbdev's Quarto files are not written: Quarto is not used.
2. The processed notebooks become static pages in `_docs/`: one per notebook (named like nbdev's,
   `00_layout.ipynb` -> `layout.html`), chapters in order (the index first) with previous/next
   links, a sidebar (a toggle at phone width), an "on this page" table of contents of the h2/h3
   headings, a search box over an index shipped beside the pages (`search-index.js`: page titles,
   headings, API names, prose), copy buttons on code, code highlighted by pygments, `$...$` and
   `$$...$$` rendered to MathML by `latex2mathml`, `text/markdown` outputs rendered as Markdown,
   PNG outputs written to `_docs/figures/`. The package's source files are rendered to
   `_docs/src/` with line anchors; "source" links point there. To link to a repository instead,
   set `doc_source_url` in settings.ini (or `$DOCS_SOURCE_URL`) to a template such as
   `{git_url}/blob/{branch}/{path}#L{line}` (`git_url`, `branch` from settings.ini). A table cell
   that names a module (`fused_csa_nb.layout`) links to its chapter, and so does the first cell of
   its row. No page loads anything from the network.
3. With `--check` (after the build) or `--check-only`, every page is opened in headless Chromium
   (`playwright` driving the system `chromium`, `$CHROMIUM` to override) at 1400 px and 390 px
   wide. It fails on
   * a console error, a request that is not `file:` or `data:`, an image that does not decode,
     an internal link to a missing page or anchor;
   * horizontal overflow of the document at either width (`scrollWidth > clientWidth`);
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
   The search box, a copy button and the sidebar toggle are exercised on the index page.
   Stored outputs a reader should not get fail the `raw-output` rule too: a warning printed to
   stderr, a raw dict printed or displayed where a table or a sentence belongs, a dict of tensors
   (inside a tuple too), an output of more than 120 lines.
   Screenshots of the index, attention, fused, bench, config and hf pages at both widths are written to
   `_docs/screenshots/`. `--allow-missing-outputs` (development) reports the missing-output rule
   as warnings; `--warn RULES` does so for any comma-separated rules (`missing-output`,
   `missing-gpu-output`, `raw-output`, `raw-gpu-output`: the same in a `#| gpu` cell's stored output).

Exit code 0 when everything built (and checked) cleanly.
"""

import argparse
import ast
import html
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
from docs_api import show_doc_target, slug  # noqa: E402

NBS, PROC, OUT = ROOT / "nbs", ROOT / "_proc", ROOT / "_docs"
ASSETS = TOOLS / "docs_assets"
_DIRECTIVE = re.compile(r"^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$")
SCREENSHOT_PAGES = {"index", "attention", "fused", "bench", "config", "hf"}
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


def raw_outputs(nbs):
    """[(notebook, cell index, what, is a GPU cell)] of stored outputs a reader should not get: a warning printed to
    stderr, a dict of tensors (`{'w': tensor(...), ...}`, inside a tuple too), an output of more than `RAW_LINES`
    lines, or a raw dict / list of dicts (`{'a': 1, ...}` printed or displayed) where a table or a sentence belongs."""
    out = []
    for nb_path in nbs:
        for i, c in enumerate(_read(nb_path)["cells"]):
            gpu = "gpu" in directives(_text(c.get("source", "")))
            for o in c.get("outputs", []):
                text = _text(o.get("text", "")) or _text(o.get("data", {}).get("text/plain", ""))
                if o.get("name") == "stderr" and re.search(r"\w*Warning\b", text):
                    out.append(
                        (
                            nb_path.name,
                            i,
                            f"a warning in the output: {text.strip().splitlines()[0][:100]!r} "
                            "(fix its cause, or silence it where it is raised with a reason)",
                            gpu,
                        )
                    )
                elif re.search(r"'[\w.]+': tensor\(", text):  # a dict of tensors printed: a dump, not evidence
                    out.append((nb_path.name, i, f"a raw dict of tensors in the output: {text.strip()[:80]!r}", gpu))
                elif text.count("\n") > RAW_LINES:
                    out.append(
                        (nb_path.name, i, f"an output of {text.count(chr(10))} lines (over {RAW_LINES}): a dump", gpu)
                    )
                elif re.search(r"^\s*\[?\{'\w+': ", text, re.M) and "text/markdown" not in o.get("data", {}):
                    out.append(
                        (
                            nb_path.name,
                            i,
                            f"a raw dict in the output: {text.strip()[:80]!r} (show a table or a sentence)",
                            gpu,
                        )
                    )
    return out


# ---------------------------------------------------------------- 2. rendering


def _lazy():
    "Imports of the render step (dev dependencies)."
    global mistune, highlight, get_lexer_by_name, HtmlFormatter, convert_tex, yaml
    import mistune
    import yaml
    from pygments import highlight
    from pygments.lexers import get_lexer_by_name
    from pygments.formatters import HtmlFormatter
    from latex2mathml.converter import convert as convert_tex


def code_html(code, lang="python"):
    try:
        lexer = get_lexer_by_name(lang or "text")
    except Exception:
        lexer = get_lexer_by_name("text")
    return highlight(code, lexer, HtmlFormatter(nowrap=False, cssclass="highlight"))


def math_html(tex, display):
    try:
        return convert_tex(tex.strip(), display="block" if display else "inline")
    except Exception:
        return f'<span class="math-tex{" display" if display else ""}">{html.escape(tex)}</span>'


# fenced code, code spans (any number of backticks), display math, inline math (Pandoc's rules: no space
# inside the dollars, no digit right after the closing one, no blank line inside)
_MATH_OR_CODE = re.compile(
    r"(?P<fence>^[ \t]*(?P<f>`{3,}|~{3,})[^\n]*\n.*?^[ \t]*(?P=f)[ \t]*$)"
    r"|(?P<span>(?<!`)(?P<t>`+)(?!`).+?(?<!`)(?P=t)(?!`))"
    r"|\$\$(?P<block>.+?)\$\$"
    r"|(?<![\\$\w])\$(?P<inl>[^\s$](?:[^$\n]|\n(?![ \t]*\n))*?)(?<![\s\\])\$(?![\w$])",
    re.S | re.M,
)
_PLACE = re.compile(r"MATHPLACEHOLDER(\d+)Z")


def _strip_tags(h):
    return re.sub(r"<[^>]+>", "", h)


def plain(h):
    "Text of an HTML fragment (for the search index)."
    h = re.sub(r"<(script|style|math)[^>]*>.*?</\1>", lambda m: " " + _strip_tags(m.group(0)) + " ", h, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(_strip_tags(h))).strip()


class Site:
    "What every page needs to know about the others: titles, module pages, API anchors, source links."

    def __init__(self, nbs, settings):
        self.settings = settings
        self.lib = settings.get("lib_name", "fused_csa_nb")
        self.base_url = (
            settings.get("doc_host", "").rstrip("/") + "/" + settings.get("doc_baseurl", "").strip("/") + "/"
        )
        self.nbs, self.pages, self.module_page, self.symbols, self.page_symbols = nbs, [], {}, {}, {}
        self.current = None  # the page being rendered: its own names win
        for nb in nbs:
            p = _read(PROC / nb.name)
            raw = next(
                (
                    _text(c["source"])
                    for c in p["cells"]
                    if c["cell_type"] == "raw" and _text(c["source"]).startswith("---")
                ),
                "",
            )
            t = (yaml.safe_load(raw.strip().strip("-")) or {}).get("title") if raw else None
            self.pages.append((page_name(nb), t or nb.stem))
            exp = default_exp(_read(nb))
            if exp:
                self.module_page[f"{self.lib}.{exp}"] = page_name(nb)
            for c in p["cells"]:
                e = c.get("metadata", {}).get("api")
                if e:
                    self._add_symbols(e, page_name(nb))
        tmpl = os.environ.get("DOCS_SOURCE_URL") or settings.get("doc_source_url", "")
        self.source_template = tmpl.strip()

    def _add_symbols(self, e, page):
        if e["kind"] in ("reexport",):
            return
        url = f"{page}#{e['anchor']}"
        mod = e.get("module", "")
        short = mod.split(".")[-1]
        local = self.page_symbols.setdefault(page, {})
        for key in (e["name"], f"{short}.{e['name']}", f"{mod}.{e['name']}"):
            self.symbols.setdefault(key, (url, e["kind"]))
            local.setdefault(key, (url, e["kind"]))
        for m in e.get("members") or []:
            for key in (m["name"], f"{short}.{m['name']}"):
                self.symbols.setdefault(key, (f"{page}#{m['anchor']}", m["kind"]))
                local.setdefault(key, (f"{page}#{m['anchor']}", m["kind"]))

    def symbol_url(self, text, exclude=()):
        "The page#anchor of a backticked name (`layout.window_topk_idxs(...)` too), or None."
        m = re.match(r"^([A-Za-z_][\w.]*)(\(.*\))?$", text.strip())
        if not m or m.group(1) in exclude:
            return None
        name = m.group(1)
        if name.startswith(self.lib + "."):
            if name in self.module_page:
                return self.module_page[name]
        hit = self.page_symbols.get(self.current, {}).get(name) or self.symbols.get(name)
        return hit[0] if hit else None

    def source_link(self, src, prefix=""):
        "(href, data-source, external?) of a {path, line} source location."
        if not src:
            return None
        if self.source_template:
            s = self.settings
            url = self.source_template.format(
                git_url=s.get("git_url", "").rstrip("/"),
                branch=s.get("branch", "main"),
                path=src["path"],
                line=src["line"],
            )
            if "{path}" not in self.source_template:
                url = url.rstrip("/") + f"/{src['path']}#L{src['line']}"
            return url, f"{src['path']}:{src['line']}", True
        return f"{prefix}src/{src['path']}.html#L{src['line']}", f"{src['path']}:{src['line']}", False


class Markdown:
    "Markdown -> HTML with anchored headings (unique on the page), local links, pygments code and MathML."

    def __init__(self, site, ids, link_code=False):
        outer = self
        self.site, self.ids, self.headings, self.link_code, self.exclude = site, ids, [], link_code, set()
        self.maths = []

        class R(mistune.HTMLRenderer):
            def heading(self, text, level, **attrs):
                shown = _PLACE.sub(lambda m: outer.maths[int(m.group(1))], text)
                hid = outer.unique(slug(_PLACE.sub(lambda m: outer.tex[int(m.group(1))], text)))
                outer.headings.append((level, hid, re.sub(r"</?a\b[^>]*>", "", shown)))
                return f'<h{level} id="{html.escape(hid)}">{text}</h{level}>\n'

            def link(self, text, url, title=None):
                auto = url.startswith(site.base_url)
                url, ext = outer.local_url(url)
                t = f' title="{html.escape(title)}"' if title else ""
                x = ' class="external" rel="noopener"' if ext else (" data-autolink" if auto else "")
                return f'<a href="{html.escape(url)}"{t}{x}>{text}</a>'

            def codespan(self, text):
                code = f"<code>{html.escape(text)}</code>"
                if outer.link_code:
                    url = site.symbol_url(text, outer.exclude)
                    if url:
                        return f'<a href="{html.escape(url)}" class="api-link">{code}</a>'
                return code

            def block_code(self, code, info=None):
                lang = (info or "").split()[0] if info else ""
                lang = {"": "text", "sh": "bash", "shell": "bash", "console": "text"}.get(lang, lang)
                return code_html(code, lang)

        self.md = mistune.create_markdown(renderer=R(escape=False), plugins=["table", "strikethrough"])

    def unique(self, hid):
        base, k = hid or "section", 1
        while hid in self.ids or not hid:
            k += 1
            hid = f"{base}-{k}"
        self.ids.add(hid)
        return hid

    def local_url(self, url):
        "Links into the published docs (nbdev's `add_links`) become links between the local pages."
        if url.startswith(self.site.base_url):
            url = url[len(self.site.base_url) :]
        if re.match(r"^[a-z]+:", url):
            return url, True
        return url, False

    def __call__(self, text, exclude=()):
        text = re.sub(r"\]\(([^)\s]+)\)\{[^}\n]*\}", r"](\1)", text)  # drop Pandoc attributes {target=...}
        self.exclude = set(exclude)
        self.maths, self.tex = [], []

        def keep(m):
            if m.group("block") is None and m.group("inl") is None:
                return m.group(0)
            tex = m.group("block") if m.group("block") is not None else m.group("inl")
            self.maths.append(math_html(tex, m.group("block") is not None))
            self.tex.append(tex)
            return f"MATHPLACEHOLDER{len(self.maths) - 1}Z"

        out = self.md(_MATH_OR_CODE.sub(keep, text))
        out = re.sub(r"<p>MATHPLACEHOLDER(\d+)Z</p>", lambda m: self.maths[int(m.group(1))], out)
        out = _PLACE.sub(lambda m: self.maths[int(m.group(1))], out)
        return self.link_modules(out)

    def inline(self, text, exclude=()):
        "Inline markdown (a title with `code`) without the paragraph."
        return re.sub(r"^<p>|</p>\s*$", "", self(str(text), exclude).strip())

    def link_modules(self, out):
        "A table cell naming a module (`fused_csa_nb.layout`) links to its chapter; so does its row's first cell."
        mp = self.site.module_page

        def row(m):
            r = m.group(0)
            page = None

            def cell(c):
                nonlocal page
                name = html.unescape(c.group(2))
                if name in mp:
                    page = page or mp[name]
                    return f'{c.group(1)}<a href="{mp[name]}"><code>{c.group(2)}</code></a>{c.group(3)}'
                return c.group(0)

            r = re.sub(r"(<td[^>]*>\s*)<code>([\w.]+)</code>(\s*</td>)", cell, r)
            if page:
                r = re.sub(
                    r"^(<tr>\s*<td[^>]*>)([^<]+)(</td>)",
                    lambda c: f'{c.group(1)}<a href="{page}">{c.group(2)}</a>{c.group(3)}',
                    r,
                    count=1,
                )
            return r

        return re.sub(r"<tr>.*?</tr>", row, out, flags=re.S)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _output_markdown(md, text):
    "A `text/markdown` output: its headings two levels down (`#` -> h3) and out of the page's table of contents."
    text = re.sub(r"^(#{1,6})(?=\s)", lambda m: "#" * min(6, len(m.group(1)) + 2), text, flags=re.M)
    n = len(md.headings)
    h = md(text)
    del md.headings[n:]
    return h


_ENV_PATH = re.compile(r"(?:/[^\s/:'\"]+)+/((?:site|dist)-packages)/")


def render_outputs(cell, md, fig_dir, stem, ci):
    parts = []
    for k, o in enumerate(cell.get("outputs", [])):
        kind = o.get("output_type")
        if kind == "stream":
            cls = "stderr" if o.get("name") == "stderr" else "stdout"
            txt = _ENV_PATH.sub(
                r"…/\1/", _ANSI.sub("", _text(o.get("text")))
            )  # another machine's install paths, shortened
            if txt.strip():
                parts.append(f'<pre class="output {cls}">{html.escape(txt.rstrip())}</pre>')
        elif kind == "error":
            tb = _ANSI.sub("", "\n".join(o.get("traceback", [])) or f"{o.get('ename')}: {o.get('evalue')}")
            parts.append(f'<pre class="output error">{html.escape(tb)}</pre>')
        elif kind in ("display_data", "execute_result"):
            d = o.get("data", {})
            if "image/png" in d:
                import base64

                fig_dir.mkdir(parents=True, exist_ok=True)
                name = f"{stem}-{ci}-{k}.png"
                (fig_dir / name).write_bytes(base64.b64decode(_text(d["image/png"])))
                alt = html.escape(_text(d.get("text/plain", "figure")))
                parts.append(f'<figure class="output"><img src="figures/{name}" alt="{alt}"></figure>')
            elif "image/svg+xml" in d:
                parts.append(f'<div class="output svg">{_text(d["image/svg+xml"])}</div>')
            elif "text/markdown" in d:
                parts.append(f'<div class="output markdown">{_output_markdown(md, _text(d["text/markdown"]))}</div>')
            elif "text/html" in d:
                parts.append(f'<div class="output html">{_text(d["text/html"])}</div>')
            elif "text/latex" in d:
                parts.append(f'<div class="output">{math_html(_text(d["text/latex"]).strip("$"), True)}</div>')
            elif "text/plain" in d:
                parts.append(f'<pre class="output">{html.escape(_ANSI.sub("", _text(d["text/plain"])))}</pre>')
    return parts


# ---------------------------------------------------------------- API entries


def _wrap_call(head, args, tail="", width=88):
    "`head(args...)tail`, one line when short, else the arguments packed on indented lines."
    one = f"{head}({', '.join(args)}){tail}"
    if len(one) <= width or not args:
        return one
    lines, cur = [], "    "
    for a in args:
        piece = a + ", "
        if len(cur) + len(piece) > width and cur.strip():
            lines.append(cur.rstrip())
            cur = "    "
        cur += piece
    lines.append(cur.rstrip().rstrip(","))
    return f"{head}(\n" + "\n".join(lines) + f"\n){tail}"


def _param_text(p):
    star = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p["kind"], "")
    s = star + p["name"]
    if p["annotation"]:
        s += f": {p['annotation']}"
    if p["default"] is not None:
        s += (" = " if p["annotation"] else "=") + p["default"]
    return s


def _sig_args(sig):
    out, kw_marked = [], False
    params = sig["params"]
    for i, p in enumerate(params):
        if p["kind"] == "KEYWORD_ONLY" and not kw_marked and not any(q["kind"] == "VAR_POSITIONAL" for q in params):
            out.append("*")
            kw_marked = True
        out.append(_param_text(p))
        if p["kind"] == "POSITIONAL_ONLY" and (i + 1 == len(params) or params[i + 1]["kind"] != "POSITIONAL_ONLY"):
            out.append("/")
    return out


def _comment_md(text):
    "A source comment as Markdown: `*` is arithmetic there, not emphasis (code spans kept)."
    return "".join(p if p.startswith("`") else p.replace("*", "\\*") for p in re.split(r"(`[^`]*`)", text or ""))


class ApiRenderer:
    def __init__(self, site, md):
        self.site, self.md = site, md

    def link_type(self, ann):
        "An annotation with the package's classes linked."
        if not ann:
            return ""

        def sub(m):
            url = self.site.symbol_url(m.group(0))
            hit = self.site.page_symbols.get(self.site.current, {}).get(m.group(0)) or self.site.symbols.get(m.group(0))
            if url and hit and hit[1] in ("class", "dataclass", "namedtuple"):
                return f'<a href="{html.escape(url)}" class="api-link">{m.group(0)}</a>'
            return m.group(0)

        return "<code>" + re.sub(r"[A-Za-z_][\w.]*", sub, html.escape(ann)) + "</code>"

    def signature(self, e, kind):
        name = e["name"].split(".")[-1]
        sig = e.get("signature")
        if kind in ("dataclass", "namedtuple", "class"):
            bases = e.get("bases")
            head = ("@dataclass\n" if kind == "dataclass" else "") + f"class {name}" + (f"({bases})" if bases else "")
            if kind == "class" and sig:
                return (
                    head
                    + ":\n    "
                    + _wrap_call("def __init__", ["self"] + _sig_args(sig), "", 84).replace("\n", "\n    ")
                )
            return head
        if kind == "property":
            ret = sig.get("returns") if sig else None
            return f"@property\n{name}" + (f" -> {ret}" if ret else "")
        deco = {"classmethod": "@classmethod\n", "staticmethod": "@staticmethod\n"}.get(kind, "")
        ret = f" -> {sig['returns']}" if sig and sig.get("returns") else ""
        return deco + _wrap_call(f"def {name}", _sig_args(sig) if sig else ["..."], ret)

    def param_table(self, rows, head="Parameter", exclude=()):
        if not rows:
            return ""
        body = []
        for name, ann, default, desc in rows:
            body.append(
                f"<tr><td><code>{html.escape(name)}</code></td><td>{self.link_type(ann)}</td>"
                f"<td>{'<code>' + html.escape(default) + '</code>' if default is not None else ''}</td>"
                f"<td>{self.md.inline(desc, exclude) if desc else ''}</td></tr>"
            )
        return (
            f'<div class="table-wrap"><table class="params"><thead><tr><th>{head}</th><th>Type</th><th>Default</th>'
            f"<th>Description</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )

    def source(self, e, prefix=""):
        link = self.site.source_link(e.get("where"), prefix)
        if not link:
            return ""
        href, data, ext = link
        x = ' rel="noopener"' if ext else ""
        return (
            f'<a class="source{" external" if ext else ""}" href="{html.escape(href)}" '
            f'data-source="{html.escape(data)}"{x}>source</a>'
        )

    def entry(self, e, level=3):
        "HTML of one entry, and its search records [(anchor, title, text)]."
        kind, name, anchor = e["kind"], e["name"], e["anchor"]
        anchor = self.md.unique(anchor) if anchor not in self.md.ids else anchor
        self.md.ids.add(anchor)
        label = {"reexport": "re-export", "namedtuple": "NamedTuple"}.get(kind, kind)
        h = [
            f'<section class="api {kind}"><div class="api-head"><h{level} id="{html.escape(anchor)}" class="api-name">'
            f'<code>{html.escape(name)}</code></h{level}><span class="api-kind">{label}</span>{self.source(e)}</div>'
        ]
        params = [p["name"] for p in (e.get("signature") or {}).get("params", [])]
        records = [(anchor, name, "")]
        text = []
        if kind in ("reexport", "alias"):
            t = e["target"]
            url = self.site.symbol_url(f"{t['module']}.{t['name']}") or self.site.symbol_url(t["name"])
            what = f"[`{t['name']}`]({url})" if url else f"`{t['name']}`"
            where = self.site.module_page.get(t["module"])
            mod = f"[`{t['module']}`]({where})" if where else f"`{t['module']}`"
            msg = (
                f"Re-exported from {mod}: the same object as {what}."
                if kind == "reexport"
                else f"Another name for {what} (the same function)."
            )
            h.append(f'<div class="doc">{self.md(msg)}{self.md(e.get("summary") or "")}</div>')
            text.append(plain(msg) + " " + (e.get("summary") or ""))
        elif kind == "constant":
            value = e.get("written") or e.get("value")
            line = f"{name} = {value}" if value else f"{name}: {e.get('type')}"
            if e.get("written") and e.get("value") and e["value"] != e["written"]:
                line += f"  # = {e['value']}"
            if not value and e.get("value_summary"):
                line += f"  # {e['value_summary']}"
            elif e.get("value_summary"):
                line += f"  # {e['value_summary']}"
            h.append(f'<div class="signature">{code_html(line)}</div>')
            if e.get("doc"):
                h.append(f'<div class="doc">{self.md(e["doc"])}</div>')
            text.append(line + " " + e.get("doc", ""))
        else:
            h.append(f'<div class="signature">{code_html(self.signature(e, kind))}</div>')
            if e.get("doc"):
                h.append(f'<div class="doc">{self.md(e["doc"], params)}</div>')
                text.append(e["doc"])
            pd = e.get("params_doc") or {}
            if e.get("fields") is not None:
                rows = [(f["name"], f["annotation"], f["default"], _comment_md(f.get("doc", ""))) for f in e["fields"]]
                h.append(self.param_table(rows, "Field", [f["name"] for f in e["fields"]]))
                text += [f"{f['name']} {f.get('doc', '')}" for f in e["fields"]]
            elif e.get("signature"):
                sig = e["signature"]
                rows = [
                    (
                        {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p["kind"], "") + p["name"],
                        p["annotation"],
                        p["default"],
                        pd.get(p["name"], ""),
                    )
                    for p in sig["params"]
                ]
                if kind != "property" and (sig.get("returns") or e.get("returns_doc")) and rows:
                    rows.append(("→ returns", sig.get("returns"), None, e.get("returns_doc", "")))
                h.append(self.param_table(rows, exclude=params))
                text += [f"{p['name']} {pd.get(p['name'], '')}" for p in sig["params"]]
            members = e.get("members") or []
            if members:
                h.append('<div class="members">')
                for m in members:
                    mh, mrec = self.entry({**m, "module": e.get("module")}, level=4)
                    h.append(mh)
                    records += mrec
                h.append("</div>")
        h.append("</section>")
        records[0] = (anchor, name, re.sub(r"[`*]", "", " ".join(text)))
        return "".join(h), records


# ---------------------------------------------------------------- pages


def render_page(nb_path, site, index):
    "HTML of one page and its search records."
    current, title = site.pages[index]
    site.current = current
    proc = _read(PROC / nb_path.name)
    src = _read(nb_path)
    src_cells = {c.get("id"): c for c in src["cells"]}
    nf = none_functions(src, ROOT / site.settings.get("lib_path", site.lib))
    ids = {e["anchor"] for c in proc["cells"] for e in [c.get("metadata", {}).get("api")] if e}
    ids |= {
        m["anchor"]
        for c in proc["cells"]
        for e in [c.get("metadata", {}).get("api")]
        if e
        for m in e.get("members") or []
    }
    md = Markdown(site, set(ids) | {"content", "sidebar", "search", "search-results", "toc"})
    doc_md = Markdown(site, md.ids, link_code=True)  # docstrings: backticked package names link
    doc_md.headings = md.headings
    api = ApiRenderer(site, doc_md)
    stem = Path(current).stem
    desc, body = "", []
    records = []  # (anchor, title, kind, text)
    section = [None, title, "page", []]

    def flush():
        if section[3] or section[2] == "page":
            records.append((section[0], section[1], section[2], " ".join(section[3])))

    def add_text(h):
        nonlocal section
        pieces = re.split(r'(<h([2-6]) id="([^"]+)">(.*?)</h\2>)', h, flags=re.S)
        section[3].append(plain(pieces[0]))
        for k in range(1, len(pieces), 5):
            flush()
            section = [pieces[k + 2], plain(pieces[k + 3]), "section", []]
            section[3].append(plain(pieces[k + 4]))

    for ci, cell in enumerate(proc["cells"]):
        s = _text(cell.get("source"))
        if cell["cell_type"] == "raw":
            if s.startswith("---"):
                fm = yaml.safe_load(s.strip().strip("-")) or {}
                desc = fm.get("description", "")
            continue
        if cell["cell_type"] == "markdown":
            if "AUTOGENERATED! DO NOT EDIT" in s:
                continue
            h = md(s)
            body.append(f'<section class="md">{h}</section>')
            add_text(h)
            continue
        entry = cell.get("metadata", {}).get("api")
        if entry:
            h, recs = api.entry(entry)
            body.append(h)
            records.extend((a, t, "api", x) for a, t, x in recs)
            for a, t, x in recs[:1]:
                md.headings.append((3, a, f"<code>{html.escape(t)}</code>"))
            continue
        d = directives(s)
        code = "\n".join(line for line in s.splitlines() if not _DIRECTIVE.match(line)).strip("\n")
        outs = [] if d.get("output") == "false" else render_outputs(cell, md, OUT / "figures", stem, ci)
        show_src = code and d.get("echo") != "false"
        if show_doc_target(s) and not entry:
            print(
                f"WARN {nb_path.name}: {show_doc_target(s)} rendered from nbdev's text (no API entry)", file=sys.stderr
            )
        if not show_src and not outs:
            continue
        orig = src_cells.get(cell.get("id"))
        osrc = _text(orig["source"]) if orig else s
        od = directives(osrc)
        fl = {f for f in ("gpu", "slow") if f in od}
        _, missing, note, _ = (
            output_status(osrc, orig.get("outputs", []) if orig else cell.get("outputs", []), nf)
            if show_src
            else (False, False, "", "")
        )
        cls = ["cell"] + sorted(fl) + (["missing"] if missing else [])
        h = []
        if "gpu" in fl and outs:
            h.append('<div class="badge">GPU cell · output of the last GPU run</div>')
        elif "gpu" in fl:
            h.append('<div class="badge">GPU cell</div>')
        elif "slow" in fl:
            h.append('<div class="badge">slow cell (skipped by the CPU tests)</div>')
        if show_src:
            src_html = code_html(code)
            if "code-fold" in d:
                summ = html.escape(d.get("code-summary", "Source"))
                src_html = f"<details open><summary>{summ}</summary>{src_html}</details>"
            h.append(f'<div class="input">{src_html}</div>')
        h += outs
        if note:
            h.append(f'<div class="note{" missing" if missing else ""}" role="note">{md.inline(note)}</div>')
        body.append(f'<div class="{" ".join(cls)}">{"".join(h)}</div>')
    flush()
    toc = "".join(
        f'<li class="l{lvl}"><a href="#{hid}">{txt}</a></li>'
        for lvl, hid, txt in md.headings
        if lvl in (2, 3) and not hid.startswith("_")
    )
    nav = "".join(
        f'<li{" class=current" if name == current else ""}><a href="{name}"'
        f"{' aria-current=page' if name == current else ''}>{md.inline(t)}</a></li>"
        for name, t in site.pages
    )
    pager = []
    if index > 0:
        n, t = site.pages[index - 1]
        pager.append(f'<a class="prev" href="{n}" rel="prev"><span>← Previous</span>{md.inline(t)}</a>')
    if index + 1 < len(site.pages):
        n, t = site.pages[index + 1]
        pager.append(f'<a class="next" href="{n}" rel="next"><span>Next →</span>{md.inline(t)}</a>')
    lead = f'<p class="lead">{md.inline(desc)}</p>' if desc else ""
    h1 = md.inline(title)
    toc_html = (
        (
            f'<nav class="toc" id="toc" aria-label="On this page"><details open><summary>On this page</summary>'
            f"<ul>{toc}</ul></details></nav>"
        )
        if toc
        else ""
    )
    page = PAGE.format(
        title=html.escape(plain(h1)),
        site=html.escape(site.settings.get("title", site.lib)),
        root="",
        nav=nav,
        toc=toc_html,
        h1=f'<h1 class="title">{h1}</h1>',
        lead=lead,
        body="\n".join(body),
        pager=f'<nav class="pager" aria-label="Chapters">{"".join(pager)}</nav>',
    )
    page_title = plain(h1)
    recs = [
        {
            "u": current + (f"#{a}" if a else ""),
            "t": t if a else page_title,
            "p": page_title,
            "k": k,
            "x": (plain(desc) + " " + x if k == "page" else x)[:1500],
        }
        for a, t, k, x in records
    ]
    return page, recs


PAGE = """<!DOCTYPE html>
<html lang="en" data-root="{root}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} – {site}</title>
<link rel="stylesheet" href="{root}style.css">
<script src="{root}search-index.js" defer></script>
<script src="{root}site.js" defer></script>
</head><body>
<header class="topbar">
<button class="nav-toggle" type="button" aria-controls="sidebar" aria-expanded="false"
 aria-label="Chapters"><span></span></button>
<a class="site" href="{root}index.html">{site}</a>
<div class="search" role="search"><input type="search" id="search" placeholder="Search" autocomplete="off"
 spellcheck="false" aria-label="Search the documentation" aria-controls="search-results"><div class="results"
 id="search-results" hidden></div></div>
</header>
<div class="layout">
<nav class="sidebar" id="sidebar" aria-label="Chapters"><ul>{nav}</ul></nav>
<header class="page-head">{h1}{lead}</header>
{toc}
<main id="content">
{body}
{pager}
</main>
</div></body></html>
"""


def render_source(rel, site):
    "A source file of the package as a page with line anchors (`#L29`)."
    from pygments.lexers import PythonLexer

    class Lines(HtmlFormatter):
        def wrap(self, source):
            n = 0
            for t, line in source:
                if t == 1:
                    n += 1
                    yield (
                        1,
                        f'<span class="ln" id="L{n}"><a class="lno" href="#L{n}" '
                        f'aria-hidden="true">{n}</a>{line.rstrip(chr(10))}</span>',
                    )
                else:
                    yield t, line

    text = (ROOT / rel).read_text(encoding="utf-8")
    code = highlight(text, PythonLexer(), Lines(cssclass="highlight source-code", nowrap=False))
    depth = len(Path(rel).parts)
    root = "../" * depth
    mod = ".".join(Path(rel).with_suffix("").parts)
    page = site.module_page.get(mod)
    back = (
        f'<p class="lead">Documented in <a href="{root}{page}">{html.escape(dict(site.pages).get(page, page))}</a>.</p>'
        if page
        else ""
    )
    nav = "".join(f'<li><a href="{root}{n}">{Markdown(site, set()).inline(t)}</a></li>' for n, t in site.pages)
    return PAGE.format(
        title=html.escape(rel),
        site=html.escape(site.settings.get("title", site.lib)),
        root=root,
        nav=nav,
        toc="",
        h1=f'<h1 class="title"><code>{html.escape(rel)}</code></h1>',
        lead=back,
        body=f'<div class="source-file">{code}</div>',
        pager="",
    )


def _unlink_missing_anchors(out):
    "nbdev links every backticked name it knows, private ones too: keep only links whose anchor exists."
    pages = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.html")}
    ids = {n: set(re.findall(r' id="([^"]+)"', t)) for n, t in pages.items()}

    def fix(m, here):
        page, _, frag = html.unescape(m.group(1)).partition("#")
        ok = (page or here) in ids and (not frag or frag in ids[page or here])
        return m.group(0) if ok else m.group(2)

    for n, t in pages.items():
        new = re.sub(r'<a href="([^"]*)" data-autolink>(.*?)</a>', lambda m: fix(m, n), t)
        if new != t:
            (out / n).write_text(new, encoding="utf-8")


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
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "figures").mkdir(parents=True)
    site = Site(nbs, settings)
    index = []
    for i, nb in enumerate(nbs):
        page, recs = render_page(nb, site, i)
        (OUT / site.pages[i][0]).write_text(page, encoding="utf-8")
        index += recs
    _unlink_missing_anchors(OUT)
    if not site.source_template:
        lib_dir = ROOT / settings.get("lib_path", site.lib)
        for p in sorted(lib_dir.glob("*.py")):
            if p.name.startswith("_"):
                continue  # the package's own index and __init__: no entries link there
            rel = p.relative_to(ROOT).as_posix()
            dst = OUT / "src" / (rel + ".html")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(render_source(rel, site), encoding="utf-8")
    (OUT / "search-index.js").write_text(
        "window.SITE_SEARCH = " + json.dumps(index, ensure_ascii=False, separators=(",", ":")) + ";\n", encoding="utf-8"
    )
    css = (ASSETS / "style.css").read_text(encoding="utf-8")
    (OUT / "style.css").write_text(css + HtmlFormatter(style="friendly").get_style_defs(".highlight"), encoding="utf-8")
    shutil.copy(ASSETS / "site.js", OUT / "site.js")
    print(
        f"docs: {len(nbs)} pages in {OUT.relative_to(ROOT) if OUT.is_relative_to(ROOT) else OUT}/ (nbdev processing "
        f"{t1 - t0:.0f} s, rendering {time.perf_counter() - t1:.1f} s; {len(index)} search entries)"
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

PAGE_INFO = """() => {
  const de = document.documentElement;
  const overflowing = () => {
    if (de.scrollWidth <= de.clientWidth) return null;
    const w = de.clientWidth, hits = [];
    for (const el of document.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.right > w + 1 && r.width > 0) {
        let p = el.parentElement, inside = false;
        while (p && p !== document.body) { const o = getComputedStyle(p).overflowX;
          if (o === 'auto' || o === 'scroll' || o === 'hidden') { inside = true; break; } p = p.parentElement; }
        if (!inside) hits.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
                                (el.className && typeof el.className === 'string'
                                  ? '.' + el.className.trim().split(/\\s+/).join('.') : '') +
                                ' (right edge ' + Math.round(r.right) + ' px)');
      }
      if (hits.length >= 3) break;
    }
    return {scroll: de.scrollWidth, client: de.clientWidth, culprits: hits};
  };
  const mdTable = /^\\s*\\|?\\s*:?-{3,}:?\\s*(\\|\\s*:?-{3,}:?\\s*)+\\|?\\s*$/m;
  const pres = [...document.querySelectorAll('pre.output, .output pre')];
  const wide = [], tables = [];
  for (const p of pres) {
    const o = getComputedStyle(p).overflowX, box = p.getBoundingClientRect();
    const main = p.closest('main');
    const mr = main ? main.getBoundingClientRect().right : de.clientWidth;
    if ((p.scrollWidth > p.clientWidth + 1 && !(o === 'auto' || o === 'scroll')) || box.right > mr + 1)
      wide.push(p.textContent.slice(0, 60));
    if (mdTable.test(p.textContent)) tables.push(p.textContent.trim().split('\\n')[0].slice(0, 70));
  }
  return {
    bad_images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src')),
    n_images: document.images.length,
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    sources: [...document.querySelectorAll('a.source')].map(a => [a.getAttribute('href'), a.dataset.source]),
    resources: performance.getEntriesByType('resource').map(e => e.name),
    overflow: overflowing(), wide_pre: wide, md_tables: tables,
  };
}"""


def _interactions(page, log):
    "The search box, a copy button and the sidebar toggle on the index page work."
    problems = []
    page.fill("#search", "CSAConfig")
    page.wait_for_timeout(150)
    hrefs = page.eval_on_selector_all("#search-results a", "as => as.map(a => a.getAttribute('href'))")
    if not any(h.endswith("#csaconfig") for h in hrefs):
        problems.append(f"search for 'CSAConfig' does not offer its API entry (results: {hrefs[:5]})")
    page.keyboard.press("Escape")
    page.fill("#search", "")
    if page.locator("button.copy").count():
        page.locator("button.copy").first.click()
        page.wait_for_timeout(100)
        label = page.locator("button.copy").first.inner_text()
        if label not in ("Copied", "Selected"):
            problems.append(f"copy button did not copy (label {label!r})")
    else:
        problems.append("no copy button on the index page")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(50)
    page.click(".nav-toggle")
    page.wait_for_timeout(50)
    if not page.is_visible("#sidebar"):
        problems.append("the sidebar toggle does not show the chapters at 390 px")
    page.click(".nav-toggle")
    return problems


def check(warn=(), nbs=None):
    import tempfile
    from playwright.sync_api import sync_playwright

    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("FAIL: no chromium found (apt-get install chromium, or set $CHROMIUM)", file=sys.stderr)
        return False
    pages = sorted(OUT.glob("*.html")) + sorted((OUT / "src").rglob("*.html"))
    if not pages:
        print("FAIL: no pages in _docs/ (build first)", file=sys.stderr)
        return False
    problems, warnings, ids, links, sources = [], [], {}, [], []

    def rule(name, msg):
        (warnings if name in warn else problems).append(msg)

    shots = OUT / "screenshots"
    shots.mkdir(exist_ok=True)
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
                if not r.url.startswith(("file:", "data:"))
                else None
            ),
        )

        def route(r):
            if r.request.url.startswith(("file:", "data:")):
                return r.continue_()
            log.append(f"request leaving the machine: {r.request.url}")
            return r.abort()

        ctx.route("**/*", route)
        for p in pages:
            rel = p.relative_to(OUT).as_posix()
            log.clear()
            page.set_viewport_size({"width": WIDTHS[0], "height": 900})
            page.goto(p.as_uri(), wait_until="load")
            page.wait_for_timeout(30)
            info = page.evaluate(PAGE_INFO)
            ids[rel] = set(info["ids"])
            seen = {}
            for i in info["ids"]:
                seen[i] = seen.get(i, 0) + 1
            for dup in sorted(i for i, k in seen.items() if k > 1):
                log.append(f"anchor #{dup} on the page twice")
            links += [(rel, h) for h in info["links"]]
            sources += [(rel, h, d) for h, d in info["sources"]]
            for u in info["resources"]:
                if not u.startswith(("file:", "data:")):
                    log.append(f"resource not local: {u}")
            for src in info["bad_images"]:
                log.append(f"image not decoded: {src}")
            for t in info["wide_pre"]:
                rule("raw-output", f"{rel}: an output wider than the page that does not scroll: {t!r}")
            for t in info["md_tables"]:
                rule(
                    "raw-output",
                    f"{rel}: raw Markdown table text in an output (display it with IPython.display.Markdown): {t!r}",
                )
            overflow = {WIDTHS[0]: info["overflow"]}
            if p.stem in SCREENSHOT_PAGES and p.parent == OUT:
                page.screenshot(path=str(shots / f"{p.stem}-{WIDTHS[0]}.png"))
            for w in WIDTHS[1:]:
                page.set_viewport_size({"width": w, "height": 844})
                if p.parent == OUT:
                    page.reload(wait_until="load")  # laid out (and scripted) as a phone would
                page.wait_for_timeout(30)
                overflow[w] = page.evaluate(PAGE_INFO)["overflow"]
                if p.stem in SCREENSHOT_PAGES and p.parent == OUT:
                    page.screenshot(path=str(shots / f"{p.stem}-{w}.png"))
            for w, o in overflow.items():
                if o:
                    log.append(
                        f"horizontal overflow at {w} px: scrollWidth {o['scroll']} > clientWidth {o['client']}; "
                        f"widest: {', '.join(o['culprits']) or '?'}"
                    )
            if rel == "index.html":
                page.set_viewport_size({"width": WIDTHS[0], "height": 900})
                log += _interactions(page, log)
            problems += [f"{rel}: {m}" for m in dict.fromkeys(log)]
            if p.parent == OUT:
                print(
                    f"  {rel:24s} {len(info['links']):4d} links {info['n_images']:3d} images"
                    f"{'' if not log else '  ' + str(len(set(log))) + ' problem(s)'}"
                )
        ctx.close()
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
    ap.add_argument("--jobs", type=int, default=2, help="notebooks processed at once (default 2)")
    ap.add_argument("--reuse-proc", action="store_true", help="render the notebooks already processed in _proc/")
    ap.add_argument("--nbs", default=None, help="the notebooks' folder (default: nbs_path of settings.ini)")
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
        ok = check(warn)
    print(f"docs: {'ok' if ok else 'FAILED'} in {time.perf_counter() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
