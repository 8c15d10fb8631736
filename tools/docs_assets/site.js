// The documentation site's behaviour: search over the shipped index, copy buttons, the chapter menu, the
// "on this page" box. Offline: nothing is fetched, the index is the script search-index.js loaded before this one.
(function () {
  "use strict";
  var root = document.documentElement.getAttribute("data-root") || "";

  // ---- chapter menu (narrow screens)
  var toggle = document.querySelector(".nav-toggle");
  function setNav(open) {
    document.body.classList.toggle("nav-open", open);
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }
  if (toggle) toggle.addEventListener("click", function (e) {
    e.stopPropagation();
    setNav(!document.body.classList.contains("nav-open"));
  });
  document.addEventListener("click", function (e) {
    var side = document.getElementById("sidebar");
    if (document.body.classList.contains("nav-open") && side && !side.contains(e.target)) setNav(false);
  });

  // ---- "on this page": folded where it sits above the text
  var toc = document.querySelector(".toc details");
  if (toc && window.matchMedia("(max-width: 1199px)").matches) toc.removeAttribute("open");

  // ---- copy buttons on code blocks
  function copyText(text, done) {
    function fallback() {
      var ta = document.createElement("textarea");
      ta.value = text; ta.setAttribute("readonly", ""); ta.style.position = "fixed"; ta.style.opacity = "0";
      document.body.appendChild(ta); ta.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
      document.body.removeChild(ta);
      done(ok);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else fallback();
  }
  document.querySelectorAll("main .highlight").forEach(function (block) {
    var pre = block.querySelector("pre");
    if (!pre || block.closest(".source-file")) return;
    var b = document.createElement("button");
    b.type = "button"; b.className = "copy"; b.textContent = "Copy"; b.setAttribute("aria-label", "Copy the code");
    b.addEventListener("click", function () {
      copyText(pre.innerText.replace(/\n$/, ""), function (ok) {
        if (!ok) {                         // no clipboard here: select the code for Ctrl+C
          var r = document.createRange(); r.selectNodeContents(pre);
          var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
        }
        b.textContent = ok ? "Copied" : "Selected"; b.classList.add("done");
        setTimeout(function () { b.textContent = "Copy"; b.classList.remove("done"); }, 1600);
      });
    });
    block.appendChild(b);
  });

  // ---- search
  var input = document.getElementById("search"), box = document.getElementById("search-results");
  var entries = window.SITE_SEARCH || [];
  if (!input || !box) return;
  var kindWeight = { api: 3, section: 2, page: 2.5 };
  var lowered = entries.map(function (e) {
    return { t: (e.t || "").toLowerCase(), x: (e.x || "").toLowerCase(), p: (e.p || "").toLowerCase() };
  });
  function esc(s) {
    return s.replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; });
  }
  function mark(text, terms) {
    var out = esc(text);
    terms.forEach(function (t) {
      if (!t) return;
      var re = new RegExp("(" + esc(t).replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + ")", "ig");
      out = out.replace(re, "<mark>$1</mark>");
    });
    return out;
  }
  function snippet(text, terms) {
    var low = text.toLowerCase(), at = -1;
    for (var i = 0; i < terms.length && at < 0; i++) at = low.indexOf(terms[i]);
    if (at < 0) return text.slice(0, 140);
    var start = Math.max(0, at - 50);
    return (start > 0 ? "…" : "") + text.slice(start, start + 160);
  }
  function search(q) {
    var terms = q.toLowerCase().split(/\s+/).filter(Boolean);
    if (!terms.length) return [];
    var hits = [];
    for (var i = 0; i < entries.length; i++) {
      var L = lowered[i], score = 0, all = true;
      for (var k = 0; k < terms.length; k++) {
        var t = terms[k], s = 0;
        if (L.t === t) s += 60;
        else if (L.t.indexOf(t) === 0) s += 30;
        else if (L.t.indexOf(t) >= 0) s += 15;
        var n = 0, from = 0, pos;
        while ((pos = L.x.indexOf(t, from)) >= 0 && n < 8) { n++; from = pos + t.length; }
        s += n * 2;
        if (L.p.indexOf(t) >= 0) s += 1;
        if (!s) { all = false; break; }
        score += s;
      }
      if (all) hits.push([score * (kindWeight[entries[i].k] || 1), i]);
    }
    hits.sort(function (a, b) { return b[0] - a[0] || a[1] - b[1]; });
    return hits.slice(0, 20).map(function (h) { return entries[h[1]]; });
  }
  var active = -1;
  function show(q) {
    var res = search(q), terms = q.toLowerCase().split(/\s+/).filter(Boolean);
    active = -1;
    if (!q.trim()) { box.hidden = true; box.innerHTML = ""; return; }
    if (!res.length) { box.innerHTML = '<div class="none">No match for “' + esc(q) + '”</div>'; box.hidden = false; return; }
    box.innerHTML = res.map(function (e) {
      var title = e.k === "api" ? "<code>" + mark(e.t, terms) + "</code>" : mark(e.t, terms);
      var where = e.k === "page" ? "" : '<span class="r-where">' + esc(e.p) + "</span>";
      var kind = e.k === "api" ? '<span class="r-kind">API</span>' : "";
      return '<a href="' + esc(root + e.u) + '"><span class="r-title">' + title + "</span>" + kind + where +
        '<span class="r-text">' + mark(snippet(e.x || "", terms), terms) + "</span></a>";
    }).join("");
    box.hidden = false;
  }
  function move(d) {
    var links = box.querySelectorAll("a");
    if (!links.length) return;
    if (active >= 0) links[active].classList.remove("active");
    active = (active + d + links.length) % links.length;
    links[active].classList.add("active");
    links[active].scrollIntoView({ block: "nearest" });
  }
  input.addEventListener("input", function () { show(input.value); });
  input.addEventListener("focus", function () { if (input.value.trim()) show(input.value); });
  input.addEventListener("keydown", function (e) {
    if (e.key === "ArrowDown") { e.preventDefault(); move(1); }
    else if (e.key === "ArrowUp") { e.preventDefault(); move(-1); }
    else if (e.key === "Enter") {
      var links = box.querySelectorAll("a");
      if (links.length) { e.preventDefault(); window.location.href = links[Math.max(active, 0)].getAttribute("href"); }
    } else if (e.key === "Escape") { box.hidden = true; input.blur(); }
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && document.activeElement !== input && !/^(INPUT|TEXTAREA)$/.test(document.activeElement.tagName)) {
      e.preventDefault(); input.focus();
    }
  });
  document.addEventListener("click", function (e) {
    if (!box.hidden && !box.contains(e.target) && e.target !== input) box.hidden = true;
  });
})();
