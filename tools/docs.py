#!/usr/bin/env python3
"""Build the documentation site from the notebooks, offline, into `_docs/` (and check it in Chromium).

Usage: python tools/docs.py [--check] [--check-only] [--reuse-proc] [--jobs N]

1. Every notebook in `nbs/` (found by name, `_*` skipped) goes through nbdev's docs processing
   (`nbdev.processors.FilterDefaults`, the processors behind `nbdev_proc_nbs`: frontmatter,
   `show_doc` cells for exported names, executing import/export/show_doc/`#| exec_doc` cells,
   hiding `#| hide` and `#| export` cells) into `_proc/`. nbdev's Quarto files
   (`nbs/_quarto.yml`, `nbs/nbdev.yml`) are not written: Quarto is not used.
2. The processed notebooks become static pages in `_docs/`: one per notebook (named like nbdev's,
   `00_layout.ipynb` -> `layout.html`), a sidebar on each, API entries from the `show_doc`
   outputs, code highlighted by pygments, math rendered to MathML by `latex2mathml`, PNG outputs
   written to `_docs/figures/`. No page loads anything from the network.
3. With `--check` (after the build) or `--check-only`, every page is opened in headless Chromium
   (`playwright` driving the system `chromium`, `$CHROMIUM` to override): a console error, a
   request that is not `file:` or `data:`, an image that does not decode, or an internal link to
   a missing page or anchor fails the check. Screenshots of the index and of one chapter are
   written to `_docs/screenshots/`.

Exit code 0 when everything built (and checked) cleanly.
"""
import argparse
import html
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS, PROC, OUT = ROOT / "nbs", ROOT / "_proc", ROOT / "_docs"
_DIRECTIVE = re.compile(r"^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$")


def notebooks():
    "The notebooks of `nbs/`: the index first, then the chapters by file name."
    nbs = sorted(p for p in NBS.glob("*.ipynb") if not p.name.startswith(("_", ".")))
    return sorted(nbs, key=lambda p: (p.stem != "index", p.name))


def page_name(nb_path):
    "nbdev's page name: the notebook name without its number prefix (`04_fused.ipynb` -> `fused.html`)."
    return re.sub(r"^\d+[a-z]?_", "", Path(nb_path).stem) + ".html"


# ---------------------------------------------------------------- 1. nbdev processing

def _process_one(src, dst):
    "Run nbdev's docs processors on one notebook (in a worker process); return an error text or None."
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ["IN_TEST"] = "1"                       # as nbdev's serve_drv does
    import warnings
    from execnb.nbio import read_nb, write_nb
    from nbdev.processors import FilterDefaults
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            nb = read_nb(src)
            FilterDefaults()(nb)
            write_nb(nb, dst)
        except Exception as e:                        # report every notebook, not just the first failure
            cause = f"\n  caused by {type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else ""
            return f"{e}{cause}"
    mixed = [str(w.message).split("\n---\n")[1].splitlines()[0] for w in caught if "imports and other code" in str(w.message)]
    if mixed: return "cells mixing imports with other code (nbdev would execute them): " + "; ".join(mixed)
    return None


def process(nbs, jobs):
    "Process the notebooks in `jobs` worker processes (as `nbdev_proc_nbs` does); report every failure."
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    PROC.mkdir(exist_ok=True)
    for stale in PROC.glob("*.ipynb"): stale.unlink()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tools"), str(ROOT)] + [os.environ.get("PYTHONPATH", "")])
    sys.path.insert(0, str(ROOT / "tools"))
    import docs as this                               # the workers find `_process_one` by module name
    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as ex:
        futs = [(nb, ex.submit(this._process_one, str(nb), str(PROC / nb.name))) for nb in nbs]
        errors = {nb.name: f.result() for nb, f in futs if f.result()}
    for name, err in errors.items(): print(f"FAIL nbdev processing {name}: {err}", file=sys.stderr)
    return not errors


# ---------------------------------------------------------------- 2. rendering

def _lazy():
    "Imports of the render step (dev dependencies)."
    global mistune, pygments, highlight, get_lexer_by_name, HtmlFormatter, convert_tex, yaml
    import mistune, pygments, yaml
    from pygments import highlight
    from pygments.lexers import get_lexer_by_name
    from pygments.formatters import HtmlFormatter
    from latex2mathml.converter import convert as convert_tex


def _settings():
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    return cfg["DEFAULT"]


def slug(text):
    "Heading anchor as Quarto/nbdev make it (`CSAConfig.v4_flash` -> `csaconfig.v4_flash`)."
    text = re.sub(r"<[^>]+>", "", html.unescape(text)).strip().lower()
    return re.sub(r"[^\w.\-]", "", re.sub(r"\s+", "-", text))


def code_html(code, lang="python"):
    try: lexer = get_lexer_by_name(lang or "text")
    except Exception: lexer = get_lexer_by_name("text")
    return highlight(code, lexer, HtmlFormatter(nowrap=False, cssclass="highlight"))


def math_html(tex, display):
    try: return convert_tex(tex.strip(), display="block" if display else "inline")
    except Exception:
        return f'<span class="math-tex{" display" if display else ""}">{html.escape(tex)}</span>'


_MATH_OR_CODE = re.compile(r"(```.*?```|`[^`\n]*`|\$\$(?P<block>.+?)\$\$|(?<![\\$\w])\$(?P<inl>[^\s$][^$\n]*?)(?<!\s)\$(?![\w$]))", re.S)


class _Renderer:
    "Markdown -> HTML with anchored headings, local links, pygments code and MathML."

    def __init__(self, pages, base_url):
        outer = self
        self.pages, self.base_url, self.headings = pages, base_url.rstrip("/") + "/", []

        class R(mistune.HTMLRenderer):
            def heading(self, text, level, **attrs):
                hid = slug(text)
                outer.headings.append((level, hid, re.sub(r"<[^>]+>", "", text)))
                return f'<h{level} id="{html.escape(hid)}">{text}</h{level}>\n'

            def link(self, text, url, title=None):
                auto = url.startswith(outer.base_url)
                url, ext = outer.local_url(url)
                t = f' title="{html.escape(title)}"' if title else ""
                x = ' class="external" rel="noopener"' if ext else (" data-autolink" if auto else "")
                return f'<a href="{html.escape(url)}"{t}{x}>{text}</a>'

            def block_code(self, code, info=None):
                lang = (info or "").split()[0] if info else ""
                if lang in ("", "sh", "bash", "text", "console"): lang = {"": "text", "sh": "bash"}.get(lang, lang)
                return code_html(code, lang)

        self.md = mistune.create_markdown(renderer=R(escape=False), plugins=["table", "strikethrough"])

    def local_url(self, url):
        "Links into the published docs (nbdev's `add_links`) become links between the local pages."
        if url.startswith(self.base_url): url = url[len(self.base_url):]
        if re.match(r"^[a-z]+:", url): return url, True
        return url, False

    def __call__(self, text):
        text = re.sub(r"\]\(([^)\s]+)\)\{[^}\n]*\}", r"](\1)", text)        # drop Pandoc attributes {target=...}
        maths = []

        def keep(m):
            if m.group("block") is None and m.group("inl") is None: return m.group(0)
            maths.append(math_html(m.group("block") or m.group("inl"), m.group("block") is not None))
            return f"MATHPLACEHOLDER{len(maths) - 1}Z"

        out = self.md(_MATH_OR_CODE.sub(keep, text))
        out = re.sub(r"<p>MATHPLACEHOLDER(\d+)Z</p>", lambda m: maths[int(m.group(1))], out)
        return re.sub(r"MATHPLACEHOLDER(\d+)Z", lambda m: maths[int(m.group(1))], out)


def _inline(md, text):
    "Inline markdown (a title with `code`) without the paragraph."
    return re.sub(r"^<p>|</p>\s*$", "", md(str(text)).strip())


def _text(x): return "".join(x) if isinstance(x, list) else (x or "")


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def render_outputs(cell, md, fig_dir, stem, ci):
    parts = []
    for k, o in enumerate(cell.get("outputs", [])):
        kind = o.get("output_type")
        if kind == "stream":
            cls = "stderr" if o.get("name") == "stderr" else "stdout"
            txt = _ANSI.sub("", _text(o.get("text")))
            if txt.strip(): parts.append(f'<pre class="output {cls}">{html.escape(txt.rstrip())}</pre>')
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
            elif "image/svg+xml" in d: parts.append(f'<div class="output">{_text(d["image/svg+xml"])}</div>')
            elif "text/markdown" in d: parts.append(f'<div class="output markdown">{md(_text(d["text/markdown"]))}</div>')
            elif "text/html" in d: parts.append(f'<div class="output html">{_text(d["text/html"])}</div>')
            elif "text/latex" in d: parts.append(f'<div class="output">{math_html(_text(d["text/latex"]).strip("$"), True)}</div>')
            elif "text/plain" in d: parts.append(f'<pre class="output">{html.escape(_ANSI.sub("", _text(d["text/plain"])))}</pre>')
    return parts


def cell_flags(nb_path):
    "Test flags (`gpu`, `slow`) per cell id of the source notebook (nbdev's processing drops directive lines)."
    out = {}
    for c in json.loads(Path(nb_path).read_text(encoding="utf-8"))["cells"]:
        if c["cell_type"] == "code":
            out[c.get("id")] = {m.group(1) for m in map(_DIRECTIVE.match, _text(c["source"]).splitlines())
                                if m and m.group(1) in ("gpu", "slow")}
    return out


def render_page(proc_path, pages, md_factory, current, src_path):
    nb = json.loads(proc_path.read_text(encoding="utf-8"))
    test_flags = cell_flags(src_path)
    md = md_factory()
    stem = Path(current).stem
    title, desc, body = stem, "", []
    for ci, cell in enumerate(nb["cells"]):
        src = _text(cell.get("source"))
        if cell["cell_type"] == "raw":
            if src.startswith("---"):
                fm = yaml.safe_load(src.strip().strip("-")) or {}
                title, desc = fm.get("title", title), fm.get("description", "")
            continue
        if cell["cell_type"] == "markdown":
            if "AUTOGENERATED! DO NOT EDIT" in src: continue
            body.append(f'<section class="md">{md(src)}</section>')
            continue
        lines = src.splitlines()
        dirs = {}
        for l in lines:
            m = _DIRECTIVE.match(l)
            if m: dirs[m.group(1)] = m.group(2).strip('"')
        code = "\n".join(l for l in lines if not _DIRECTIVE.match(l)).strip("\n")
        outs = render_outputs(cell, md, OUT / "figures", stem, ci)
        show_src = code and dirs.get("echo") != "false"
        if not show_src and not outs: continue
        fl = test_flags.get(cell.get("id"), set())
        cls = ["cell"] + sorted(fl)
        h = []
        if fl:
            what = ("GPU cell · " + ("output of the last GPU run" if outs else "no stored output")) if "gpu" in fl \
                else "slow cell (skipped by the CPU tests)"
            h.append(f'<div class="badge">{what}</div>')
        if show_src:
            src_html = code_html(code)
            if "code-fold" in dirs:
                summ = html.escape(dirs.get("code-summary", "Source"))
                src_html = f"<details open><summary>{summ}</summary>{src_html}</details>"
            h.append(f'<div class="input">{src_html}</div>')
        h += outs
        body.append(f'<div class="{" ".join(cls)}">{"".join(h)}</div>')
    toc = "".join(f'<li class="l{lvl}"><a href="#{hid}">{html.escape(txt)}</a></li>'
                  for lvl, hid, txt in md.headings if lvl in (2, 3) and not hid.startswith("_"))
    nav = []
    for name, ptitle in pages:
        cur = ' class="current"' if name == current else ""
        nav.append(f'<li{cur}><a href="{name}">{_inline(md, ptitle)}</a>'
                   + (f'<ul class="toc">{toc}</ul>' if name == current and toc else "") + "</li>")
    lead = f'<p class="lead">{_inline(md, desc)}</p>' if desc else ""
    return PAGE.format(title=html.escape(re.sub(r"`", "", str(title))), site=html.escape(SITE_TITLE), nav="".join(nav),
                       h1=md(f"# {title}").replace("<h1", '<h1 class="title"', 1), lead=lead, body="\n".join(body))


SITE_TITLE = "fused_csa_nb"
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} – {site}</title>
<link rel="stylesheet" href="style.css">
</head><body>
<nav class="sidebar"><a class="site" href="index.html">{site}</a><ul>{nav}</ul></nav>
<main>{h1}{lead}
{body}
</main></body></html>
"""

CSS = """
:root { --fg:#1d232a; --muted:#5b6673; --line:#dde2e8; --accent:#1f5fbf; --code:#f6f8fa; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color:var(--fg); }
.sidebar { position:fixed; top:0; left:0; bottom:0; width:260px; overflow-y:auto; padding:18px 14px;
  border-right:1px solid var(--line); background:#fbfcfd; font-size:14px; }
.sidebar .site { display:block; font-weight:700; font-size:17px; margin-bottom:12px; color:var(--fg); text-decoration:none; }
.sidebar ul { list-style:none; margin:0; padding:0; }
.sidebar li { margin:2px 0; }
.sidebar li > a { display:block; padding:3px 8px; border-radius:5px; color:var(--fg); text-decoration:none; }
.sidebar li.current > a { background:#e6eefb; color:var(--accent); font-weight:600; }
.sidebar ul.toc { margin:4px 0 8px 10px; border-left:2px solid var(--line); }
.sidebar ul.toc a { padding:1px 8px; font-size:12.5px; color:var(--muted); display:block; text-decoration:none; }
.sidebar ul.toc li.l3 a { padding-left:18px; }
main { margin-left:260px; padding:24px 40px 80px; max-width:1100px; }
h1.title { margin-top:0; font-size:30px; }
p.lead { font-size:17px; color:var(--muted); margin-top:-6px; }
h2 { border-bottom:1px solid var(--line); padding-bottom:4px; margin-top:34px; }
a { color:var(--accent); }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size:0.9em; background:var(--code); padding:1px 4px; border-radius:4px; }
pre code { background:none; padding:0; }
table { border-collapse:collapse; margin:10px 0; font-size:13.5px; display:block; overflow-x:auto; }
th, td { border:1px solid var(--line); padding:4px 9px; text-align:left; vertical-align:top; }
th { background:#f1f4f8; }
.highlight, pre.output { margin:0; padding:9px 12px; overflow-x:auto; font:12.5px/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.highlight pre { margin:0; font:inherit; }
.cell { margin:12px 0; }
.cell .input { background:var(--code); border:1px solid var(--line); border-radius:6px; }
.cell .input details summary { cursor:pointer; padding:4px 12px; color:var(--muted); font-size:13px; }
pre.output { border-left:3px solid var(--line); margin-top:4px; white-space:pre; }
pre.output.stderr { border-left-color:#d9a400; background:#fffbea; }
pre.output.error { border-left-color:#c62828; background:#fdecea; }
.output.markdown { border:1px solid var(--line); border-radius:6px; padding:2px 14px; margin:16px 0; background:#fff; }
.output.markdown h3 { font-family:"DejaVu Sans Mono", Menlo, monospace; font-size:17px; margin:8px 0; }
.output.markdown hr { display:none; }
.output.markdown a.external { float:right; font-size:12px; }
figure.output { margin:6px 0; }
figure.output img { max-width:100%; height:auto; border:1px solid var(--line); }
.badge { display:inline-block; font-size:11.5px; color:#7a4d00; background:#fff3d6; border:1px solid #f0d08a;
  border-radius:4px; padding:0 6px; margin-bottom:3px; }
.cell.slow .badge { color:#4d4d4d; background:#efefef; border-color:#d5d5d5; }
math[display="block"], .math-tex.display { display:block; margin:12px 0; overflow-x:auto; }
.math-tex { font-family:"DejaVu Serif", serif; font-style:italic; white-space:pre-wrap; }
blockquote { margin:10px 0; padding:2px 14px; border-left:4px solid var(--line); color:var(--muted); }
"""


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
        if new != t: (out / n).write_text(new, encoding="utf-8")


def build(jobs, reuse=False):
    _lazy()
    t0 = time.perf_counter()
    nbs = notebooks()
    if reuse: nbs = [nb for nb in nbs if (PROC / nb.name).exists()]
    elif not process(nbs, jobs): return False
    t1 = time.perf_counter()
    s = _settings()
    base = s.get("doc_host", "").rstrip("/") + "/" + s.get("doc_baseurl", "").strip("/") + "/"
    if OUT.exists(): shutil.rmtree(OUT)
    (OUT / "figures").mkdir(parents=True)
    titles = []
    for nb in nbs:
        fm = json.loads((PROC / nb.name).read_text(encoding="utf-8"))["cells"]
        raw = next((_text(c["source"]) for c in fm if c["cell_type"] == "raw" and _text(c["source"]).startswith("---")), "")
        t = (yaml.safe_load(raw.strip().strip("-")) or {}).get("title") if raw else None
        titles.append((page_name(nb), t or nb.stem))
    for nb in nbs:
        page = page_name(nb)
        (OUT / page).write_text(render_page(PROC / nb.name, titles, lambda: _Renderer(titles, base), page, nb), encoding="utf-8")
    _unlink_missing_anchors(OUT)
    (OUT / "style.css").write_text(CSS + HtmlFormatter(style="friendly").get_style_defs(".highlight"), encoding="utf-8")
    print(f"docs: {len(nbs)} pages in {OUT.relative_to(ROOT)}/ (nbdev processing {t1 - t0:.0f} s, "
          f"rendering {time.perf_counter() - t1:.1f} s)")
    return True


# ---------------------------------------------------------------- 3. browser check

LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-default-apps", "--disable-extensions", "--no-default-browser-check"]


def check(screenshot_page=None):
    import tempfile
    from playwright.sync_api import sync_playwright
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe: print("FAIL: no chromium found (apt-get install chromium, or set $CHROMIUM)", file=sys.stderr); return False
    pages = sorted(OUT.glob("*.html"))
    if not pages: print("FAIL: no pages in _docs/ (build first)", file=sys.stderr); return False
    problems, ids, links = [], {}, []
    shots = OUT / "screenshots"
    shots.mkdir(exist_ok=True)
    chapters = [p for p in pages if p.name != "index.html"]
    screenshot_page = screenshot_page or ("fused.html" if (OUT / "fused.html").exists() else chapters[0].name)
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=exe, headless=True, args=LAUNCH_ARGS,
                                                    viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        log = []
        page.on("console", lambda m: log.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") and
                (m.type == "error" or "Failed" in m.text) else None)
        page.on("pageerror", lambda e: log.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: log.append(f"request failed: {r.url} ({r.failure})")
                if not r.url.startswith(("file:", "data:")) else None)

        def route(r):
            if r.request.url.startswith(("file:", "data:")): return r.continue_()
            log.append(f"request leaving the machine: {r.request.url}")
            return r.abort()
        ctx.route("**/*", route)
        for p in pages:
            log.clear()
            page.goto(p.as_uri(), wait_until="load")
            page.wait_for_timeout(50)
            info = page.evaluate("""() => ({
                bad_images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src')),
                n_images: document.images.length,
                ids: [...document.querySelectorAll('[id]')].map(e => e.id),
                links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
                resources: performance.getEntriesByType('resource').map(e => e.name),
            })""")
            ids[p.name] = set(info["ids"])
            links += [(p.name, h) for h in info["links"]]
            for u in info["resources"]:
                if not u.startswith(("file:", "data:")): log.append(f"resource not local: {u}")
            for src in info["bad_images"]: log.append(f"image not decoded: {src}")
            problems += [f"{p.name}: {m}" for m in dict.fromkeys(log)]
            if p.name in ("index.html", screenshot_page):
                page.screenshot(path=str(shots / f"{p.stem}.png"))
            print(f"  {p.name:24s} {len(info['links']):4d} links {info['n_images']:3d} images"
                  f"{'' if not log else '  ' + str(len(set(log))) + ' problem(s)'}")
        ctx.close()
    for src, href in links:
        if re.match(r"^[a-z]+:", href): continue                      # external anchors: not loaded, not checked
        path, _, frag = href.partition("#")
        target = path or src
        if target not in ids:
            if not (OUT / target).exists(): problems.append(f"{src}: broken link {href} (no such page)")
            continue
        if frag and frag not in ids[target]: problems.append(f"{src}: broken link {href} (no anchor #{frag})")
    for m in problems: print("FAIL", m, file=sys.stderr)
    print(f"check: {len(pages)} pages, {len(links)} links; {len(problems)} problem(s); "
          f"screenshots in {shots.relative_to(ROOT)}/")
    return not problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="after building, check every page in headless Chromium")
    ap.add_argument("--check-only", action="store_true", help="check the pages already in _docs/ without building")
    ap.add_argument("--jobs", type=int, default=2, help="notebooks processed at once (default 2)")
    ap.add_argument("--reuse-proc", action="store_true", help="render the notebooks already processed in _proc/")
    args = ap.parse_args(argv)
    ok = True
    if not args.check_only: ok = build(args.jobs, args.reuse_proc)
    if ok and (args.check or args.check_only): ok = check()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
