"""mkdocs hooks of the documentation site (named in the settings `tools/docs.py` writes): what the generator does
not do by itself for the notebook pages.

* The table of contents lists the page's own h2/h3 headings: the Markdown cells' and the API entries'
  (mkdocs-jupyter's misses the entries, which are HTML); anchors are made unique on the page.
* Every table's cells carry their column's header (`data-label`) and the table is marked `data-stack`:
  below 600 px the stylesheet shows its rows as cards, each cell labelled.
* The search index leaves out the cells' code and text outputs (prose, headings and API entries stay).
* nbconvert's loaders of MathJax and Mermaid (from a CDN) are dropped: the math is MathML already,
  and no page has a diagram.
* The notebook styles mkdocs-jupyter inlines into every page (~0.6 MB) are written once, to
  `stylesheets/notebook.css` (named in `extra_css`): pages stay small and the search index holds text only.
"""

import html
import re
from pathlib import Path

from mkdocs.structure.toc import get_toc

_HEADING = re.compile(r'<h([1-6])([^>]*?)\sid="([^"]*)"([^>]*)>(.*?)</h\1>', re.S)
_CDN = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->"
    r'|<script type="module">\s*document\.addEventListener\("DOMContentLoaded", async \(\) => \{\s*'
    r"const diagrams = .*?</script>|<!-- End of mermaid configuration -->",
    re.S,
)
_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S)
_styles = {}  # the notebook pages' inline styles, each once, in order


def _plain(h):
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", h))).strip()


def _headings(content):
    "Unique anchors, and the table of contents: Markdown cells' h1-h3, API entries' h3."
    seen, toc = set(), []
    api = {m.group(3) for m in _HEADING.finditer(content) if "api-name" in m.group(2) + m.group(4)}
    cells = re.split(r'(?=<div class="jp-Cell )', content)
    for k, chunk in enumerate(cells):
        in_markdown = "jp-MarkdownCell" in chunk[:300]

        def fix(m):
            level, pre, hid, post, inner = int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
            is_api = "api-name" in pre + post
            new = hid
            if new in seen or (not is_api and new in api):  # an entry keeps its anchor; a heading gives way
                n = 2
                while f"{hid}-{n}" in seen or f"{hid}-{n}" in api:
                    n += 1
                new = f"{hid}-{n}"
            seen.add(new)
            if new != hid:
                inner = inner.replace(f'href="#{hid}"', f'href="#{new}"')
            title = _plain(
                re.sub(
                    r'<a class="anchor-link".*?</a>|<span class="api-kind">.*?</span>|<a class="api-source".*?</a>',
                    "",
                    inner,
                )
            )
            if (in_markdown and level <= 3) or (is_api and level == 3):
                toc.append({"level": level, "id": new, "name": title, "children": []})
            return f'<h{level}{pre} id="{new}"{post}>{inner}</h{level}>'

        cells[k] = _HEADING.sub(fix, chunk)
    return "".join(cells), toc


def _nest(flat):
    root = []
    stack = []
    for t in flat:
        while stack and stack[-1]["level"] >= t["level"]:
            stack.pop()
        (stack[-1]["children"] if stack else root).append(t)
        stack.append(t)
    return root


def _label_tables(content):
    "Each body cell gets its column's header as `data-label`; a table with a header row gets `data-stack`."

    def table(m):
        t = m.group(0)
        head = re.search(r"<thead.*?</thead>", t, re.S)
        if not head:
            return t
        heads = [_plain(h) for h in re.findall(r"<th\b[^>]*>(.*?)</th>", head.group(0), re.S)]

        def row(r):
            col = iter(range(10**6))

            def cell(c):
                i = next(col)
                label = f' data-label="{html.escape(heads[i], quote=True)}"' if i < len(heads) and heads[i] else ""
                return f"<td{c.group(1)}{label}>{c.group(2)}</td>"

            return re.sub(r"<td\b([^>]*)>(.*?)</td>", cell, r.group(0), flags=re.S)

        body = re.sub(r"<tr\b.*?</tr>", row, t[head.end() :], flags=re.S)
        return t[: head.end()].replace("<table", "<table data-stack", 1) + body

    return re.sub(r"<table\b(?:(?!<table\b).)*?</table>", table, content, flags=re.S)


def _search_exclude(content):
    "The search index holds the prose, headings and API entries: not the cells' highlighted code, not text outputs."
    content = content.replace('<div class="highlight-ipynb', '<div data-search-exclude class="highlight-ipynb')
    return re.sub(r'<div class="(jp-RenderedText [^"]*)"', r'<div data-search-exclude class="\1"', content)


def on_page_content(content, page, config, files):
    content = _CDN.sub("", content)
    if page.file.src_uri.endswith(".ipynb"):
        for m in _STYLE.finditer(content):
            _styles.setdefault(m.group(1).strip(), len(_styles))
        content = _search_exclude(_STYLE.sub("", content))
        content, flat = _headings(content)
        page.toc = get_toc(_nest(flat))
    return _label_tables(content)


def on_post_build(config):
    css = Path(config["site_dir"]) / "stylesheets" / "notebook.css"
    css.parent.mkdir(parents=True, exist_ok=True)
    css.write_text("\n".join(sorted(_styles, key=_styles.get)), encoding="utf-8")
