"""API entries of the documentation site: what `tools/docs.py` shows for each public name.

An entry is built from the imported object with `inspect` (not from nbdev's `show_doc` text):

* functions: the signature with the annotations as written (modules use
  `from __future__ import annotations`, so annotations are strings; a parameter without one has no
  type, whatever its default), defaults as written in the source (`1 << 30`, not `1073741824`), the
  docstring, and a parameter table whose descriptions come from the docstring;
* classes: the base classes, the constructor, the fields of dataclasses and NamedTuples (name,
  type, default, and the comment at the end of the field's line or a string right below it), and
  the public methods, classmethods, staticmethods and properties found on the class (including
  those assigned to it after its definition, like `forward`), each an entry of its own;
* constants: the value as written in the source (or a short summary of a long one) and its comment;
* re-exports (a name another module of the package defines) and aliases (a second name for one
  function) point to the entry of the object.

Parameter descriptions are read leniently from two docstring styles. Inline, flash-attn like:
"`cfg`: a `CSAConfig` ...; `ratio`: the layer's compression ratio." (several names may share a
description: "`q_offset`, `kv_slot0` (context parallelism): ..."; a backticked name may carry a
shape, "`query [sq, b, H, D]` bf16: ..."); a description runs to the next described parameter, a
blank line, or a sentence that starts a new topic ("Returns ...", "→ ...", "Label: ..."). And
Google style: an `Args:` block of `name (type): description` lines. An argument without a
description gets an empty cell.

Entries are plain JSON (stored in the processed notebook's cell metadata; no key is named `source` or ends
in `_`, which nbdev's notebook writer treats specially) so that rendering needs
no import of the package. `EntryHTML` renders an entry as the HTML the site shows (heading with the name's
anchor, signature, docstring, a row for every parameter or field), placed in the page's notebook as a cell
output for the generator to keep as it is.
"""

import ast
import dataclasses
import html
import importlib
import inspect
import io
import re
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def slug(text):
    "Heading anchor as Quarto/nbdev make it (`CSAConfig.v4_flash` -> `csaconfig.v4_flash`)."
    text = re.sub(r"<[^>]+>", "", html.unescape(text)).strip().lower()
    return re.sub(r"[^\w.\-]", "", re.sub(r"\s+", "-", text))


# ---------------------------------------------------------------- docstring parameters

_GOOGLE = re.compile(
    r"^(\s*)(Args|Arguments|Parameters|Params|Keyword [Aa]rgs|Kwargs|Other [Pp]arameters|"
    r"Returns?|Yields?|Raises)\s*:\s*$"
)
_GOOGLE_ITEM = re.compile(r"^\s*(\*{0,2}[A-Za-z_]\w*)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
# one backticked name, maybe with a shape or condition after it inside the backticks: `query [sq, b, H, D]`
_TICK_NAME = r"`\*{0,2}[A-Za-z_]\w*(?:[ \[<>=!][^`\n]*)?`"
_MARK = re.compile(
    r"(?P<names>" + _TICK_NAME + r"(?:\s*(?:,|and|or|/)\s*" + _TICK_NAME + r")*)"
    r"(?P<qual>(?:[^:;`\n.]|\n(?![ \t]*\n)|\.(?!\s)|`[^`\n]*`){0,80}?)(?<!:):(?=\s|$)"
)
# the words after a backticked name up to the end of its clause (parentheses kept whole)
_TAIL = r"((?:[^;:,\n`.()→]|\n(?![ \t]*[\n`])|\.(?!\s|$)|`[^`\n]*`|\([^()\n]*\))*)"
# a sentence that starts a new topic ends a description
_TOPIC = re.compile(
    r"(?:(?<=[.!?)])\s+|\n\s*)(?=Returns?\b|Raises\b|Yields?\b|→|[A-Z][\w-]*(?: [\w-]+){0,3}: )"
    r"|(?<=[.!?])[ \t]*\n\s*(?=[A-Z→`])"
)


def _names_in(group):
    "The (name, rest) pairs of a group of backticked names: `a [x]`, `b` -> [('a', '[x]'), ('b', '')]."
    out = []
    for chunk in re.findall(r"`([^`\n]*)`", group):
        m = re.match(r"\*{0,2}([A-Za-z_]\w*)\s*(.*)$", chunk)
        if m:
            out.append((m.group(1), m.group(2).strip()))
    return out


def _clause_start(text, i):
    "True where a clause starts: the text's start, a line's start, or after `; `, `. `, `, `."
    before = text[:i].rstrip(" ")
    return not before or before[-1] in "\n;.," or text[:i].endswith("\n")


def _clip(desc):
    "A description up to a blank line or a sentence that starts a new topic; spaces folded."
    desc = re.split(r"\n\s*\n", desc, maxsplit=1)[0]
    m = _TOPIC.search(desc)
    if m:
        desc = desc[: m.start()]
    desc = re.sub(r"\s+", " ", desc).strip()
    desc = re.sub(r"^[;,]\s*|\s*[;,]$", "", desc).strip()
    return desc[:-1] if desc.endswith(".") and not desc.endswith("..") else desc


def _google_sections(doc):
    "Google-style sections: (prose without them, {param: (type, desc)}, returns text)."
    lines, keep, params, returns = doc.splitlines(), [], {}, []
    i = 0
    while i < len(lines):
        m = _GOOGLE.match(lines[i])
        if not m:
            keep.append(lines[i])
            i += 1
            continue
        indent, kind = len(m.group(1)), m.group(2).lower()
        i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            if not lines[i].strip() and (
                i + 1 >= len(lines) or len(lines[i + 1]) - len(lines[i + 1].lstrip()) <= indent
            ):
                break
            body.append(lines[i])
            i += 1
        if kind.startswith(("return", "yield")):
            returns.append(" ".join(line.strip() for line in body))
        elif not kind.startswith("raise"):
            item_indent, cur = None, None
            for line in body:
                ind = len(line) - len(line.lstrip())
                im = _GOOGLE_ITEM.match(line)
                if im and (item_indent is None or ind <= item_indent):
                    item_indent = ind
                    cur = im.group(1).lstrip("*")
                    params[cur] = [im.group(2) or "", im.group(3).strip()]
                elif cur and line.strip():
                    params[cur][1] += " " + line.strip()
        else:
            keep.append(lines[i - len(body) - 1])
            keep += body  # Raises: kept as prose
    return "\n".join(keep).strip("\n"), {k: tuple(v) for k, v in params.items()}, " ".join(returns).strip()


def _clauses(text):
    "The clauses of prose: split at `;` and at sentence ends, never inside parentheses, brackets or backticks."
    out, cur, depth, tick = [], [], 0, False
    for i, ch in enumerate(text):
        if ch == "`":
            tick = not tick
        elif not tick and ch in "([":
            depth += 1
        elif not tick and ch in ")]":
            depth = max(0, depth - 1)
        end = not tick and depth == 0 and (ch == ";" or (ch == "." and text[i + 1 : i + 2] in (" ", "\n", "")))
        if end:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [c.strip() for c in out if c.strip()]


_CLAUSE_NAMES = re.compile(
    r"(" + _TICK_NAME + r"(?:\s*(?:\([^()]*\))?\s*(?:,|and|or|/)\s*" + _TICK_NAME + r")*"
    r"(?:\s*\([^()]*\))?)(?P<rest>.*)$",
    re.S,
)
_NAME_PAREN = re.compile(r"`\*{0,2}([A-Za-z_]\w*)[^`]*`\s*(\([^()]*\))?")


def _clause_docs(prose, params):
    """Descriptions from clauses that open with the parameters they describe, as prose docstrings write them:
    "`num_heads` query heads H (64); `head_dim` D, the latent width (512)" → `num_heads`: "query heads H (64)",
    `head_dim`: "D, the latent width (512)". A short heading
    before the names ("Attention shape: `x` ...") is skipped."""
    out = {}
    for cl in _clauses(re.sub(r"\s+", " ", prose)):
        cl = re.sub(r"^(?:[A-Z][\w ()/-]{0,40}:\s+)(?=`)", "", cl)
        m = _CLAUSE_NAMES.match(cl)
        if not m:
            continue
        names = [(n, paren) for n, paren in _NAME_PAREN.findall(m.group(1)) if n in params]
        rest = re.sub(r"^\s*[,:—–-]?\s*", "", m.group("rest")).strip()
        if len(names) == 1 and names[0][1] and not rest:
            rest, names = names[0][1][1:-1], [(names[0][0], "")]  # "`coeff` (0: no loss)" alone
        for n, paren in names:
            if len(rest) >= 3:
                out.setdefault(n, f"{rest} {paren}".strip() if paren else rest)
    return out


def _weak(desc):
    "A description too thin to keep when a clause gives a better one: a word or two, or a dangling fragment."
    d = (desc or "").strip()
    return len(d) < 4 or d[0] in ",;:." or d.lower() in {"and", "or", "the"}


def param_docs(doc, params):
    """Descriptions of `params` (names) found in `doc`: ({name: description}, returns description, prose).

    `prose` is the docstring without Google-style `Args:`/`Returns:` blocks (shown above the table)."""
    doc = doc or ""
    prose, google, returns = _google_sections(doc)
    params = [p for p in params if p]
    out = {p: google[p][1] for p in params if p in google and google[p][1]}
    text = prose
    marks = []
    for start in [m.start() for m in re.finditer("`", text)]:
        m = _MARK.match(text, start)
        if not m or not _clause_start(text, start) or (marks and start < marks[-1][0].end()):
            continue
        names = [(n, rest) for n, rest in _names_in(m.group("names")) if n in params]
        if names:
            marks.append((m, names))
    for k, (m, names) in enumerate(marks):
        end = marks[k + 1][0].start() if k + 1 < len(marks) else len(text)
        desc = _clip(text[m.end() : end])
        qual = re.sub(r"\s+", " ", m.group("qual")).strip()
        for n, rest in names:
            if n in out:
                continue
            head = " ".join(x for x in ((f"`{rest}`" if rest else ""), qual) if x)
            out[n] = f"{head}: {desc}" if head and desc else head or desc
    # no colon: "`name [shape]` dtype, ..." anywhere, and "...; `name` words; ..." after a semicolon
    for m in re.finditer(r"`\*{0,2}([A-Za-z_]\w*)(?:\s+([^`\n]+))?`" + _TAIL, text):
        n, rest, tail = m.group(1), (m.group(2) or "").strip(), re.sub(r"\s+", " ", m.group(3)).strip()
        if n not in params or n in out or text[m.end() : m.end() + 1] == ":":
            continue
        if rest and not re.match(r"[\[<>=!]", rest) or tail.startswith("/"):
            continue
        if rest and not (len(tail) <= 40 and re.fullmatch(r"(\w+(?:/\w+)*)?(\s*\([^()]*\))?", tail)):
            dt = re.match(r"(u?int\d+|fp\d+|bf16|f16|float\d*|bool)\b", tail)  # keep a leading dtype only
            tail = dt.group(1) if dt else ""
        if rest or (tail and text[max(0, m.start() - 2) : m.start()] == "; "):
            out[n] = " ".join(x for x in ((f"`{rest}`" if rest else ""), tail) if x)
    for n, d in _clause_docs(text, params).items():
        if _weak(out.get(n)):
            out[n] = d
    if not returns:
        m = re.search(r"(?:^|(?<=[.;)])\s+|\n)((?:Returns?\b|→)[^\n]*(?:\n(?!\s*\n)[^\n]*)*)", prose)
        if m:
            stop = next((mk.start() for mk, _ in marks if mk.start() > m.start(1)), len(prose))
            returns = _clip(re.sub(r"^(Returns?|→)\s*:?\s*", "", prose[m.start(1) : stop]))
    return out, returns, prose


# ---------------------------------------------------------------- objects


def _ann(a):
    "An annotation as text: strings as written, objects formatted (`ForwardRef('int')` -> `int`)."
    if a is inspect.Parameter.empty or a is inspect.Signature.empty:
        return None
    if isinstance(a, str):
        return a
    fa = getattr(a, "__forward_arg__", None)
    if fa:
        return fa
    return inspect.formatannotation(a)


def _short_repr(v, limit=80):
    r = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))
    return r if len(r) <= limit else r[: limit - 1] + "…"


def source_of(obj):
    "(path relative to the repository, first line) of `obj`'s definition, or None."
    try:
        obj = inspect.unwrap(obj)
        f = inspect.getsourcefile(obj)
        _, line = inspect.getsourcelines(obj)
    except (TypeError, OSError):
        return None
    try:
        rel = Path(f).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return {"path": rel.as_posix(), "line": max(1, line)}


def _def_node(obj):
    "The ast node of a function or class definition, and its source text."
    try:
        src = textwrap.dedent(inspect.getsource(inspect.unwrap(obj)))
    except (TypeError, OSError):
        return None, None
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None, None
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))), None)
    return node, src


def _source_defaults(fn):
    "{parameter: default as written in the source} of a function."
    node, src = _def_node(fn)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    a, out = node.args, {}
    pos = a.posonlyargs + a.args
    for arg, d in zip(pos[len(pos) - len(a.defaults) :], a.defaults):
        out[arg.arg] = ast.get_source_segment(src, d)
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None:
            out[arg.arg] = ast.get_source_segment(src, d)
    return {k: re.sub(r"\s+", " ", v) for k, v in out.items() if v}


def signature_of(fn, drop_first=False):
    "The parameters and return annotation of `fn` as JSON: [{name, kind, annotation, default}], returns."
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    written = _source_defaults(fn)
    params = []
    for i, p in enumerate(sig.parameters.values()):
        if drop_first and i == 0 and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        d = None
        if p.default is not p.empty:
            d = written.get(p.name)
            if d is None or len(d) > 60 or re.fullmatch(r"_\w*", d):
                d = _short_repr(p.default, 60)
        params.append({"name": p.name, "kind": p.kind.name, "annotation": _ann(p.annotation), "default": d})
    return {"params": params, "returns": _ann(sig.return_annotation)}


def _comments(src):
    "{line number (1-based, in `src`): comment text} of the trailing or full-line comments of `src`."
    out = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT and not tok.string.startswith("# %%"):
                out[tok.start[0]] = (tok.string.lstrip("#").strip(), tok.line.strip().startswith("#"))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _assignment_docs(body, src, comments):
    "{name: (default as written, doc)} of the annotated/plain assignments of a class or module body."
    out = {}
    for k, st in enumerate(body):
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            names = [st.target.id]
        elif isinstance(st, ast.Assign):
            names = [t.id for t in st.targets if isinstance(t, ast.Name)]
        else:
            continue
        value = ast.get_source_segment(src, st.value) if st.value is not None else None
        doc = ""
        trailing = comments.get(st.end_lineno)
        if trailing and not trailing[1]:
            doc = trailing[0]
        nxt = body[k + 1] if k + 1 < len(body) else None
        if (
            not doc
            and isinstance(nxt, ast.Expr)
            and isinstance(getattr(nxt, "value", None), ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            doc = inspect.cleandoc(nxt.value.value)
        if not doc:  # full-line comments right above
            above, ln = [], st.lineno - 1
            while ln in comments and comments[ln][1]:
                above.insert(0, comments[ln][0])
                ln -= 1
            doc = " ".join(above)
        for n in names:
            out[n] = (re.sub(r"\s+", " ", value) if value else None, doc)
    return out


def _fields(cls):
    "Fields of a dataclass or NamedTuple: [{name, annotation, default, doc}], or None."
    node, src = _def_node(cls)
    written = _assignment_docs(node.body, src, _comments(src)) if isinstance(node, ast.ClassDef) else {}
    if dataclasses.is_dataclass(cls):
        out = []
        for f in dataclasses.fields(cls):
            d = None
            if f.default is not dataclasses.MISSING:
                d = _short_repr(f.default, 60)
            elif f.default_factory is not dataclasses.MISSING:
                d = f"{getattr(f.default_factory, '__name__', 'factory')}()"
            w = written.get(f.name, (None, ""))
            if w[0] and len(w[0]) <= 60 and not w[0].startswith("field("):
                d = w[0]
            out.append({"name": f.name, "annotation": _ann(f.type), "default": d, "doc": w[1]})
        return out
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        ann, dflt = getattr(cls, "__annotations__", {}), getattr(cls, "_field_defaults", {})
        out = []
        for n in cls._fields:
            w = written.get(n, (None, ""))
            d = (w[0] if w[0] and len(w[0]) <= 60 else _short_repr(dflt[n], 60)) if n in dflt else None
            out.append({"name": n, "annotation": _ann(ann.get(n, inspect.Parameter.empty)), "default": d, "doc": w[1]})
        return out
    return None


def _bases(cls):
    node, src = _def_node(cls)
    if isinstance(node, ast.ClassDef) and node.bases:
        return ", ".join(ast.get_source_segment(src, b) for b in node.bases)
    b = [x.__name__ for x in cls.__bases__ if x is not object]
    return ", ".join(b) or None


def _doc(obj):
    "The object's own docstring (not one inherited from a base class, as `inspect.getdoc` would give)."
    d = getattr(obj, "__doc__", None)
    if not isinstance(d, str):
        return ""
    d = inspect.cleandoc(d)
    if inspect.isclass(obj) and d.startswith(obj.__name__ + "("):
        return ""  # generated (dataclass, NamedTuple)
    return d


def _with_params(entry, sig, extra_docs=()):
    "Add the docstring-derived parameter descriptions (and return description) to `entry`."
    names = [p["name"] for p in (sig or {}).get("params", [])] + [f["name"] for f in entry.get("fields") or []]
    docs, returns, prose = param_docs(entry["doc"], names)
    for d in extra_docs:  # e.g. an `__init__` docstring
        more, _, _ = param_docs(d, names)
        for k, v in more.items():
            docs.setdefault(k, v)
    entry["doc"], entry["params_doc"], entry["returns_doc"] = prose, docs, returns
    return entry


def describe_member(cls_name, name, raw, cls):
    "An entry for a method, classmethod, staticmethod or property `name` of class `cls`."
    full = f"{cls_name}.{name}"
    if isinstance(raw, property):
        fn, kind = raw.fget, "property"
        sig = {"params": [], "returns": _ann(inspect.signature(fn).return_annotation) if fn else None}
    elif isinstance(raw, classmethod):
        fn, kind = raw.__func__, "classmethod"
        sig = signature_of(fn, drop_first=True)
    elif isinstance(raw, staticmethod):
        fn, kind = raw.__func__, "staticmethod"
        sig = signature_of(fn)
    else:
        fn, kind = raw, "method"
        sig = signature_of(fn, drop_first=True)
    e = {
        "name": full,
        "anchor": slug(full),
        "kind": kind,
        "signature": sig,
        "doc": _doc(fn) if fn else "",
        "where": source_of(fn) if fn else None,
    }
    return _with_params(e, sig)


def _in_class_body(cls, raw) -> bool:
    """Whether member `raw` is written inside `cls`'s own body (not
    added later with `@patch`, which documents it where it is)."""
    fn = (
        raw.fget if isinstance(raw, property) else raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
    )
    code = getattr(fn, "__code__", None)
    try:
        lines, start = inspect.getsourcelines(cls)
        src = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return True
    if code is None or code.co_filename != src:
        return code is None
    return start <= code.co_firstlineno < start + len(lines)


def _members(cls):
    """Public methods, classmethods, staticmethods and properties defined
    in `cls`'s body (patched ones are documented where they are patched)."""
    out = []
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if (isinstance(raw, (classmethod, staticmethod, property)) or inspect.isfunction(raw)) and _in_class_body(
            cls, raw
        ):
            out.append(describe_member(cls.__name__, name, raw, cls))
    return out


def describe(name, obj, module):
    "The entry of public name `name` (possibly `Class.method`) of `module` (a module object)."
    base = {"name": name, "anchor": slug(name), "module": module.__name__}
    if "." in name:  # show_doc(Class.method)
        cls_name, _, attr = name.rpartition(".")
        cls = _resolve(module, cls_name)
        raw = inspect.getattr_static(cls, attr) if isinstance(cls, type) else obj
        e = describe_member(cls_name, attr, raw, cls) if isinstance(cls, type) else None
        if e:
            return {**base, **e, "module": module.__name__}
    own_module = getattr(obj, "__module__", None)
    lib = module.__name__.split(".")[0]
    if (
        (inspect.isfunction(obj) or inspect.isclass(obj))
        and own_module
        and own_module != module.__name__
        and own_module.startswith(lib + ".")
        and not own_module.split(".")[-1].startswith("_")
    ):
        target = getattr(obj, "__name__", name)
        return {
            **base,
            "kind": "reexport",
            "target": {"module": own_module, "name": target},
            "summary": _doc(obj).split("\n\n")[0],
            "where": source_of(obj),
            "doc": "",
        }
    if (
        inspect.isfunction(obj)
        and getattr(obj, "__name__", name) != name
        and getattr(module, obj.__name__, None) is obj
    ):
        return {
            **base,
            "kind": "alias",
            "target": {"module": module.__name__, "name": obj.__name__},
            "summary": _doc(obj).split("\n\n")[0],
            "where": source_of(obj),
            "doc": "",
        }
    if inspect.isclass(obj):
        fields = _fields(obj)
        kind = "dataclass" if dataclasses.is_dataclass(obj) else "namedtuple" if fields is not None else "class"
        init = vars(obj).get("__init__")
        sig = None if fields is not None else signature_of(obj)
        e = {
            **base,
            "kind": kind,
            "bases": _bases(obj),
            "signature": sig,
            "fields": fields,
            "doc": _doc(obj),
            "where": source_of(obj),
        }
        e = _with_params(e, sig, [_doc(init)] if inspect.isfunction(init) and init.__doc__ else [])
        for f in fields or []:  # a field without a comment: its description in the docstring
            if not f["doc"]:
                f["doc"] = e["params_doc"].get(f["name"], "")
        e["members"] = _members(obj)
        return e
    if callable(obj) and (
        inspect.isfunction(obj)
        or inspect.isbuiltin(obj)
        or hasattr(obj, "__wrapped__")
        or hasattr(obj, "__signature__")
    ):
        sig = signature_of(obj)
        e = {**base, "kind": "function", "signature": sig, "doc": _doc(obj), "where": source_of(obj)}
        return _with_params(e, sig)
    return {**base, **constant_of(module, name, obj)}


def constant_of(module, name, value):
    "A module-level value: its source text (or a summary), type and comment."
    info = {"kind": "constant", "type": type(value).__name__, "doc": "", "where": None}
    try:
        src_path = inspect.getsourcefile(module)
        src = Path(src_path).read_text(encoding="utf-8")
        tree = ast.parse(src)
    except (TypeError, OSError, SyntaxError):
        src = tree = None
    if tree is not None:
        docs = _assignment_docs(tree.body, src, _comments(src))
        st = next(
            (
                s
                for s in tree.body
                if isinstance(s, (ast.Assign, ast.AnnAssign))
                and name
                in [t.id for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)]
            ),
            None,
        )
        if st is not None:
            written, info["doc"] = docs.get(name, (None, ""))
            try:
                rel = Path(src_path).resolve().relative_to(ROOT).as_posix()
            except ValueError:
                rel = None
            if rel:
                info["where"] = {"path": rel, "line": st.lineno}
            if written and len(written) <= 100 and "\n" not in ast.get_source_segment(src, st.value):
                info["written"] = written
    r = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))
    if len(r) <= 100:
        info["value"] = r
    elif isinstance(value, dict):
        keys = ", ".join(map(str, list(value)[:12])) + (", …" if len(value) > 12 else "")
        info["value_summary"] = f"{len(value)} entries: {keys}"
    elif isinstance(value, (list, tuple, set, frozenset)):
        info["value_summary"] = f"{len(value)} items"
    if info.get("written") == info.get("value"):
        info.pop("written", None)
    return info


def _resolve(module, expr):
    obj = module
    for part in expr.split("."):
        obj = getattr(obj, part)
    return obj


def resolve(expr, module, lib):
    "The object `expr` (`name` or `Class.attr`) names: in `module`, else in any module of the package `lib`."
    try:
        return _resolve(module, expr), module
    except AttributeError:
        pass
    pkg = importlib.import_module(lib)
    for p in sorted(Path(pkg.__file__).parent.glob("*.py")):
        if p.stem.startswith("_"):
            continue
        m = importlib.import_module(f"{lib}.{p.stem}")
        try:
            return _resolve(m, expr), m
        except AttributeError:
            continue
    raise LookupError(expr)


# ---------------------------------------------------------------- notebook positions


def _strip_directives(src):
    return "\n".join(
        line for line in src.splitlines() if not re.match(r"^\s*#\|", line) and not re.match(r"^\s*[%!]", line)
    )


def defining_cells(src_nb):
    "{name: index of the `#| export` cell of the source notebook that defines (or imports) it}."
    out = {}
    for i, c in enumerate(src_nb["cells"]):
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if not re.search(r"^\s*#\|\s*(export|exports)\b", src, re.M):
            continue
        try:
            tree = ast.parse(_strip_directives(src))
        except SyntaxError:
            continue
        for st in tree.body:
            names = []
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [st.name]
            elif isinstance(st, ast.Assign):
                names = [t.id for t in st.targets if isinstance(t, ast.Name)]
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                names = [st.target.id]
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                names = [(a.asname or a.name).split(".")[0] for a in st.names]
            for n in names:
                out.setdefault(n, i)
    return out


_SHOW_DOC = re.compile(r"show_doc\(\s*([A-Za-z_][\w.]*)\s*(?:,[^)]*)?\)")


def show_doc_target(source):
    "The expression a `show_doc(...)` cell documents (`CSAConfig.v4_flash`), or None."
    m = _SHOW_DOC.fullmatch(_strip_directives(source).strip())
    return m.group(1) if m else None


def annotate(nb, src_nb, lib):
    """Attach an API entry (JSON, `cell.metadata["api"]`) to every `show_doc` cell of the processed notebook
    `nb`, and add a cell for each public name of the notebook's module that has none (a constant, an alias,
    a re-export): after the cells of the export cell that defines it, re-exports at the end. Returns warnings."""
    from execnb.nbio import mk_cell

    def src_text(c):
        return "".join(c["source"]) if isinstance(c["source"], list) else c["source"]

    exp = next(
        (
            m.group(1)
            for c in src_nb["cells"]
            if c["cell_type"] == "code"
            for m in [re.search(r"^\s*#\|\s*default_exp\s+([\w.]+)", src_text(c), re.M)]
            if m
        ),
        None,
    )
    module = importlib.import_module(f"{lib}.{exp}") if exp else importlib.import_module(lib)
    warnings, documented = [], set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        expr = show_doc_target(cell.source)
        if not expr:
            continue
        try:
            obj, mod = resolve(expr, module, lib)
            cell.metadata["api"] = describe(expr, obj, mod)
            documented.add(expr)
        except Exception as e:  # rendered from nbdev's text instead; the check reports a gap
            warnings.append(f"show_doc({expr}): {type(e).__name__}: {e}")
    if not exp:
        return warnings
    # where each name is defined, in terms of the processed notebook's cells
    order = {c.get("id"): i for i, c in enumerate(src_nb["cells"])}
    defined = defining_cells(src_nb)
    pos, last = [], -1
    for c in nb.cells:
        last = order.get(c.get("id"), last)
        pos.append(last)
    missing = [n for n in getattr(module, "__all__", []) if n not in documented]
    inserts, tail = [], []
    for n in missing:
        try:
            entry = describe(n, getattr(module, n), module)
        except Exception as e:
            warnings.append(f"{module.__name__}.{n}: {type(e).__name__}: {e}")
            continue
        cell = mk_cell(f"#| echo: false\nshow_doc({n})", metadata={"api": entry, "synthetic": True})
        if entry["kind"] == "reexport" or n not in defined:
            tail.append(cell)
            continue
        k = defined[n]
        at = max((i + 1 for i, p in enumerate(pos) if p <= k), default=len(nb.cells))
        inserts.append((at, len(inserts), cell))
    for at, _, cell in sorted(inserts, key=lambda x: x[:2], reverse=True):
        nb.cells.insert(at, cell)  # same place: kept in order
    if tail:
        nb.cells.append(mk_cell("## Also exported here", "markdown", metadata={"synthetic": True}))
        nb.cells.extend(tail)
    _distinct_anchors([c.metadata["api"] for c in nb.cells if c.get("metadata", {}).get("api")])
    return warnings


def _distinct_anchors(entries):
    """Names whose anchors collide (`KERNEL_LIMITS`, `kernel_limits`):
    the lowercase name keeps it, the others use their own."""
    by_anchor = {}
    for e in entries:
        by_anchor.setdefault(e["anchor"], set()).add(e["name"])
    for e in entries:
        if len(by_anchor[e["anchor"]]) > 1 and e["name"] != e["anchor"]:
            e["anchor"] = e["name"]


# ---------------------------------------------------------------- rendering an entry as HTML


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
    s = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p["kind"], "") + p["name"]
    if p["annotation"]:
        s += f": {p['annotation']}"
    if p["default"] is not None:
        s += (" = " if p["annotation"] else "=") + p["default"]
    return s


def _sig_args(sig):
    out, kw_marked, params = [], False, sig["params"]
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


def signature_text(e):
    "The entry's signature as Python source (`def f(a: int = 1) -> int`, `@dataclass\\nclass C`)."
    kind, name, sig = e["kind"], e["name"].split(".")[-1], e.get("signature")
    if kind in ("dataclass", "namedtuple", "class"):
        bases = e.get("bases")
        head = ("@dataclass\n" if kind == "dataclass" else "") + f"class {name}" + (f"({bases})" if bases else "")
        if kind == "class" and sig:
            init = _wrap_call("def __init__", ["self"] + _sig_args(sig), "", 84)
            return head + ":\n    " + init.replace("\n", "\n    ")
        return head
    if kind == "property":
        ret = sig.get("returns") if sig else None
        return f"@property\n{name}" + (f" -> {ret}" if ret else "")
    deco = {"classmethod": "@classmethod\n", "staticmethod": "@staticmethod\n"}.get(kind, "")
    ret = f" -> {sig['returns']}" if sig and sig.get("returns") else ""
    return deco + _wrap_call(f"def {name}", _sig_args(sig) if sig else ["..."], ret)


class EntryHTML:
    """An API entry as HTML: a heading with the name's anchor, kind and source link, the signature, the docstring,
    and a table of every parameter (or field) with its type, default and description.

    `md(text, exclude)`: Markdown -> HTML (backticked package names linked, except those in `exclude`);
    `url(name)`: the page#anchor of a package name or None; `kind_of(name)`: its entry kind;
    `code(text)`: highlighted Python; `source(where)`: (href, 'path:line') of a source location or None."""

    def __init__(self, md, url, kind_of, code, source):
        self.md, self.url, self.kind_of, self.code, self.source = md, url, kind_of, code, source

    def inline(self, text, exclude=()):
        return re.sub(r"^<p>|</p>\s*$", "", self.md(str(text), exclude).strip())

    def link_type(self, ann):
        "An annotation with the package's classes linked."

        def sub(m):
            url = self.url(m.group(0))
            if url and self.kind_of(m.group(0)) in ("class", "dataclass", "namedtuple"):
                return f'<a href="{html.escape(url)}">{m.group(0)}</a>'
            return m.group(0)

        return "<code>" + re.sub(r"[A-Za-z_][\w.]*", sub, html.escape(ann)) + "</code>" if ann else ""

    def table(self, rows, head="Parameter", exclude=()):
        if not rows:
            return ""
        body = "".join(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{self.link_type(ann)}</td>"
            f"<td>{'<code>' + html.escape(default) + '</code>' if default is not None else ''}</td>"
            f"<td>{self.inline(desc, exclude) if desc else ''}</td></tr>"
            for name, ann, default, desc in rows
        )
        return (
            f'<table class="api-params"><thead><tr><th>{head}</th><th>Type</th><th>Default</th>'
            f"<th>Description</th></tr></thead><tbody>{body}</tbody></table>"
        )

    def __call__(self, e, level=3, taken=None):
        "HTML of entry `e` (its members as entries of their own, one level down)."
        kind, name, anchor = e["kind"], e["name"], e["anchor"]
        label = {"reexport": "re-export", "namedtuple": "NamedTuple"}.get(kind, kind)
        src = self.source(e.get("where"))
        link = (
            f'<a class="api-source" href="{html.escape(src[0])}" data-source="{html.escape(src[1])}">source</a>'
            if src
            else ""
        )
        h = [
            f'<section class="api api-{kind}"><h{level} id="{html.escape(anchor)}" class="api-name">'
            f'<code>{html.escape(name)}</code> <span class="api-kind">{label}</span>{link}</h{level}>'
        ]
        params = [p["name"] for p in (e.get("signature") or {}).get("params", [])]
        if kind in ("reexport", "alias"):
            t = e["target"]
            url = self.url(f"{t['module']}.{t['name']}") or self.url(t["name"])
            what = f"[`{t['name']}`]({url})" if url else f"`{t['name']}`"
            where = self.url(t["module"])
            mod = f"[`{t['module']}`]({where})" if where else f"`{t['module']}`"
            msg = (
                f"Re-exported from {mod}: the same object as {what}."
                if kind == "reexport"
                else f"Another name for {what} (the same function)."
            )
            h.append(self.md(msg) + self.md(e.get("summary") or ""))
        elif kind == "constant":
            value = e.get("written") or e.get("value")
            line = f"{name} = {value}" if value else f"{name}: {e.get('type')}"
            if e.get("written") and e.get("value") and e["value"] != e["written"]:
                line += f"  # = {e['value']}"
            if e.get("value_summary"):
                line += f"  # {e['value_summary']}"
            h.append(self.code(line))
            if e.get("doc"):
                h.append(self.md(e["doc"]))
        else:
            h.append(self.code(signature_text(e)))
            if e.get("doc"):
                h.append(self.md(e["doc"], params))
            pd = e.get("params_doc") or {}
            if e.get("fields") is not None:
                rows = [(f["name"], f["annotation"], f["default"], _comment_md(f.get("doc", ""))) for f in e["fields"]]
                h.append(self.table(rows, "Field", [f["name"] for f in e["fields"]]))
            elif e.get("signature"):
                sig = e["signature"]
                star = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}
                rows = [
                    (star.get(p["kind"], "") + p["name"], p["annotation"], p["default"], pd.get(p["name"], ""))
                    for p in sig["params"]
                ]
                if kind != "property" and (sig.get("returns") or e.get("returns_doc")) and rows:
                    rows.append(("→ returns", sig.get("returns"), None, e.get("returns_doc", "")))
                h.append(self.table(rows, exclude=params))
            for m in e.get("members") or []:
                h.append(self({**m, "module": e.get("module")}, level=4))
        h.append("</section>")
        return "".join(h)
