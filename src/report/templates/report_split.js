// hcbench report.html, split layout (runs of more than 1,000 cells; src/report/html_split.rs).
// The page carries every cell once in a JSON index (#cells-index); this script filters the
// whole index, draws one page of cases of the heatmap and of the cells that did not pass at a
// time, and loads a cell's timeline from its side file (report-files/timelines-NNNN.js) when
// its square is selected. A side file is a script that calls hcbenchTimelines(n, bundle):
// a <script src> works from file:// (where fetch of local files is refused) and over http.
//
// The fragment is the one-file page's: `#cell=<cell id>&q=..&category=..&split=..&profile=..
// &outcome=..`, so links carry over; the open cell stays visible (outlined) whatever filter
// travels with it, and the pager moves to its page.
(function () {
  "use strict";
  var index = JSON.parse(document.getElementById("cells-index").textContent);
  var heatmap = document.querySelector("table.heatmap");
  var tbody = heatmap.tBodies[0];
  var pager = document.getElementById("pager");
  var detail = document.getElementById("detail");
  var placeholder = document.getElementById("tl-none");
  var failingTable = document.getElementById("failing-table");
  var failingPager = document.getElementById("failing-pager");
  var count = document.getElementById("f-count");
  var FIELDS = ["q", "category", "split", "profile", "outcome"];
  var controls = {};
  FIELDS.forEach(function (f) { controls[f] = document.getElementById("f-" + f); });

  // About this many squares per page of the heatmap, and rows per page of the failing list:
  // enough to scan, few enough that a page draws in a few milliseconds.
  var PAGE_SQUARES = 2000;
  var FAILING_ROWS = 100;
  var perRow = Math.max(1, index.groups.length * Math.max(1, index.epochs));
  var rowsPerPage = Math.min(250, Math.max(10, Math.floor(PAGE_SQUARES / perRow)));

  var cells = index.cells.map(function (c, i) {
    var kase = index.cases[c[1]];
    var outcome = index.outcomes[c[4]] || index.outcomes[index.outcomes.length - 1];
    var label = kase[0] + " with " + index.groups[c[2]] + (index.epochs > 1 ? ", epoch " + c[3] : "") + ": " + outcome[1];
    var reason = index.reasons[c[5]] || "";
    return {
      i: i,
      cell: c[0],
      caseIdx: c[1],
      caseId: kase[0],
      category: index.categories[kase[1]] || "",
      split: index.splits[kase[2]] || "",
      col: c[2],
      profile: index.groups[c[2]],
      epoch: c[3],
      outcome: outcome[0],
      words: outcome[1],
      glyph: outcome[2],
      reason: reason,
      chunk: c[6],
      label: label,
      tooltip: reason ? label + ". " + reason : label,
      text: null,
      el: null,
    };
  });
  var byCell = {};
  cells.forEach(function (c) { byCell[c.cell] = c; });

  var pinned = null; // the open cell
  var page = 0;
  var failingPage = 0;
  var rows = []; // rows of the current filter: { caseIdx, items }
  var failing = []; // cells of the current filter that did not pass
  var matching = 0;

  function state() {
    var s = {};
    FIELDS.forEach(function (f) { s[f] = controls[f] ? controls[f].value.trim() : ""; });
    return s;
  }

  function matches(item, s, q) {
    if (s.category && item.category !== s.category) return false;
    if (s.split && item.split !== s.split) return false;
    if (s.profile && item.profile !== s.profile) return false;
    if (s.outcome === "not_passed") {
      if (item.outcome === "passed") return false;
    } else if (s.outcome && item.outcome !== s.outcome) return false;
    if (!q) return true;
    if (item.text === null) item.text = (item.cell + " " + item.tooltip).toLowerCase();
    return item.text.indexOf(q) >= 0;
  }

  // Runs the filter over every cell: the rows (cases with a matching cell, in plan order)
  // and the failing list. The open cell is kept in both even when the filter hides it.
  function filter() {
    var s = state();
    var q = s.q.toLowerCase();
    var byCase = {};
    var order = [];
    failing = [];
    matching = 0;
    cells.forEach(function (item) {
      var hit = matches(item, s, q);
      if (hit) matching++;
      item.hit = hit;
      if (!hit && item !== pinned) return;
      var row = byCase[item.caseIdx];
      if (!row) {
        row = byCase[item.caseIdx] = { caseIdx: item.caseIdx, items: [] };
        order.push(row);
      }
      row.items.push(item);
      if (item.outcome !== "passed") failing.push(item);
    });
    order.sort(function (a, b) { return a.caseIdx - b.caseIdx; });
    rows = order;
    if (count) {
      var text = matching === cells.length ? cells.length + " cells" : "showing " + matching + " of " + cells.length + " cells";
      if (pinned && !pinned.hit) text += " (and the open cell, outside the filter)";
      count.textContent = text;
    }
  }

  function pageOf(item) {
    for (var r = 0; r < rows.length; r++) {
      if (rows[r].caseIdx === item.caseIdx) return Math.floor(r / rowsPerPage);
    }
    return 0;
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // A pager: "cases 1–120 of 25,000", previous and next, and a page number to jump to.
  function drawPager(nav, at, total, size, noun, go) {
    if (!nav) return;
    var pages = Math.max(1, Math.ceil(total / size));
    nav.hidden = total <= size;
    nav.textContent = "";
    var first = total === 0 ? 0 : at * size + 1;
    var last = Math.min(total, (at + 1) * size);
    var prev = el("button", { type: "button", "class": "prev" }, "‹ previous");
    prev.disabled = at === 0;
    prev.addEventListener("click", function () { go(at - 1); });
    var next = el("button", { type: "button", "class": "next" }, "next ›");
    next.disabled = at >= pages - 1;
    next.addEventListener("click", function () { go(at + 1); });
    var label = el("label", null, "page ");
    var input = el("input", { type: "number", min: "1", max: String(pages), value: String(at + 1), "class": "page" });
    input.addEventListener("change", function () {
      var n = Math.min(pages, Math.max(1, parseInt(input.value, 10) || 1));
      go(n - 1);
    });
    label.appendChild(input);
    label.appendChild(document.createTextNode(" of " + pages));
    nav.appendChild(prev);
    nav.appendChild(el("span", { "class": "range" }, noun + " " + first.toLocaleString("en") + "–" + last.toLocaleString("en") + " of " + total.toLocaleString("en")));
    nav.appendChild(next);
    nav.appendChild(label);
  }

  function drawHeatmap() {
    var pages = Math.max(1, Math.ceil(rows.length / rowsPerPage));
    if (page >= pages) page = pages - 1;
    if (page < 0) page = 0;
    cells.forEach(function (c) { c.el = null; });
    var fragment = document.createDocumentFragment();
    rows.slice(page * rowsPerPage, (page + 1) * rowsPerPage).forEach(function (row, r) {
      var kase = index.cases[row.caseIdx];
      var tr = el("tr", { "data-case": kase[0], "data-category": index.categories[kase[1]] || "", "data-split": index.splits[kase[2]] || "" });
      var th = el("th", { scope: "row" });
      th.appendChild(el("span", { "class": "case" }, kase[0]));
      th.appendChild(document.createTextNode(" "));
      th.appendChild(el("span", { "class": "cat" }, index.categories[kase[1]] || ""));
      tr.appendChild(th);
      var slots = index.groups.map(function () { return []; });
      row.items.forEach(function (item) { slots[item.col].push(item); });
      slots.forEach(function (slot, col) {
        slot.sort(function (a, b) { return a.epoch - b.epoch; });
        var td = el("td");
        var div = el("div", { "class": "slot" });
        slot.forEach(function (item) {
          var b = el("button", {
            type: "button",
            "class": "cell o-" + item.outcome + (item === pinned && !item.hit ? " pinned" : ""),
            "data-cell": item.cell,
            "data-profile": item.profile,
            "data-outcome": item.outcome,
            "data-row": String(r),
            "data-col": String(col),
            "aria-controls": "detail",
            "aria-expanded": item === pinned ? "true" : "false",
            "aria-label": item.label,
            title: item.tooltip,
          }, item.glyph);
          b.hcbenchItem = item;
          item.el = b;
          div.appendChild(b);
        });
        td.appendChild(div);
        tr.appendChild(td);
      });
      fragment.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(fragment);
    drawPager(pager, page, rows.length, rowsPerPage, "cases", function (p) {
      page = p;
      drawHeatmap();
    });
  }

  function drawFailing() {
    if (!failingTable) return;
    var pages = Math.max(1, Math.ceil(failing.length / FAILING_ROWS));
    if (failingPage >= pages) failingPage = pages - 1;
    var body = failingTable.tBodies[0];
    var fragment = document.createDocumentFragment();
    failing.slice(failingPage * FAILING_ROWS, (failingPage + 1) * FAILING_ROWS).forEach(function (item) {
      var tr = el("tr", { "data-cell-id": item.cell, "data-case": item.caseId, "data-profile": item.profile, "data-outcome": item.outcome, "data-category": item.category, "data-split": item.split });
      var th = el("th", { scope: "row" });
      th.appendChild(el("a", { "class": "open", href: "#cell=" + encodeURIComponent(item.cell) }, item.cell));
      tr.appendChild(th);
      var td = el("td");
      td.appendChild(el("span", { "class": "badge o-" + item.outcome }, item.words));
      tr.appendChild(td);
      tr.appendChild(el("td", { "class": "reason-cell" }, item.reason));
      fragment.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(fragment);
    drawPager(failingPager, failingPage, failing.length, FAILING_ROWS, "cells", function (p) {
      failingPage = p;
      drawFailing();
    });
  }

  function apply(keepPage) {
    filter();
    if (!keepPage) {
      page = pinned ? pageOf(pinned) : 0;
      failingPage = 0;
    }
    drawHeatmap();
    drawFailing();
  }

  // Timelines: side files are loaded once each, on first need.
  var chunks = {};
  var waiting = {};
  // A side file calls this with its number and its sections by cell id, as one compressed
  // bundle (inflate.js).
  window.hcbenchTimelines = function (n, bundle) {
    hcbenchInflate(bundle).then(
      function (sections) {
        chunks[n] = sections;
        settle(n, true);
      },
      function () {
        settle(n, false);
      }
    );
  };
  function settle(n, ok) {
    var callbacks = waiting[n] || [];
    delete waiting[n];
    callbacks.forEach(function (done) { done(ok); });
  }
  function sideFile(n) {
    var s = String(n);
    while (s.length < 4) s = "0" + s;
    return "report-files/timelines-" + s + ".js";
  }
  function load(n, done) {
    if (chunks[n]) return done(true);
    if (waiting[n]) return waiting[n].push(done);
    waiting[n] = [done];
    var script = document.createElement("script");
    script.src = sideFile(n);
    script.onerror = function () {
      script.remove();
      settle(n, false);
    };
    document.head.appendChild(script);
  }

  var section = null; // the timeline shown
  function display(node) {
    if (section) section.remove();
    section = node;
    node.hidden = false;
    detail.appendChild(node);
    if (placeholder) placeholder.hidden = true;
    detail.scrollTop = 0;
  }

  // A cell without a side-file timeline (or whose side file did not load): what the index
  // knows, and how to see the rest.
  function stub(item, why) {
    var s = el("section", { "class": "timeline", "data-cell": item.cell });
    var head = el("header", { "class": "tl-head" });
    var h = el("h3", { tabindex: "-1" });
    h.appendChild(el("code", null, item.cell));
    head.appendChild(h);
    var badge = el("span", { "class": "badge o-" + item.outcome });
    badge.appendChild(el("span", { "aria-hidden": "true" }, item.glyph));
    badge.appendChild(document.createTextNode(" " + item.words));
    head.appendChild(badge);
    s.appendChild(head);
    s.appendChild(el("p", { "class": "tl-meta" }, "case " + item.caseId + (item.category ? " (" + item.category + ")" : "") + " · profile " + item.profile + (index.epochs > 1 ? " · epoch " + item.epoch : "")));
    if (item.reason) s.appendChild(el("p", { "class": "reason" + (item.outcome !== "passed" ? " bad" : "") }, item.reason));
    s.appendChild(el("p", { "class": "placeholder" }, why));
    return s;
  }

  function fromHtml(html) {
    var holder = document.createElement("div");
    holder.innerHTML = html;
    return holder.firstElementChild;
  }

  function show(item, focus) {
    if (pinned && pinned.el) pinned.el.setAttribute("aria-expanded", "false");
    // A square of the page shown keeps the page; a link to a cell elsewhere goes to its page.
    var onPage = item.el !== null;
    pinned = item;
    apply(onPage);
    if (item.el) item.el.setAttribute("aria-expanded", "true");
    var replay = "hcbench replay cells/" + item.cell + "/trace.jsonl";
    var done = function (node) {
      if (pinned !== item) return; // another square was selected meanwhile
      display(node);
      var box = detail.getBoundingClientRect();
      if (box.top > window.innerHeight * 0.6 || box.bottom < 0) detail.scrollIntoView({ block: "start" });
      if (focus) {
        if (item.el) item.el.scrollIntoView({ block: "center" });
        var heading = node.querySelector("h3");
        if (heading) heading.focus({ preventScroll: true });
      }
    };
    if (!item.chunk) {
      done(stub(item, "This report keeps the timelines of " + index.side_timelines + " of its " + cells.length + " cells (those that did not pass first). See this one from the run directory with: " + replay));
      return;
    }
    load(item.chunk, function (ok) {
      var html = ok && chunks[item.chunk] ? chunks[item.chunk][item.cell] : null;
      if (html) done(fromHtml(html));
      else done(stub(item, "Its timeline is in " + sideFile(item.chunk) + " beside this page, which could not be loaded or opened: keep report.html and its report-files folder together, or open the report with hcbench view. Or see it from the run directory with: " + replay));
    });
  }

  // The fragment this script wrote last: its own hashchange is not a navigation.
  var written = null;
  function writeFragment() {
    var s = state();
    var parts = [];
    if (pinned) parts.push("cell=" + encodeURIComponent(pinned.cell));
    FIELDS.forEach(function (f) {
      if (s[f]) parts.push(f + "=" + encodeURIComponent(s[f]));
    });
    var hash = parts.length ? "#" + parts.join("&") : "";
    if (hash === location.hash || (hash === "" && location.hash === "#")) return;
    written = hash;
    var url = location.href.split("#")[0] + hash;
    try {
      history.replaceState(history.state, "", url);
    } catch (e) {
      location.replace(hash || "#");
    }
  }

  function decode(text) {
    try {
      return decodeURIComponent(text);
    } catch (e) {
      return text;
    }
  }

  // `tl-` + the cell id with anything outside [A-Za-z0-9_.-] replaced: the one-file page's
  // section ids, which older links use.
  function byDomId(id) {
    for (var i = 0; i < cells.length; i++) {
      if ("tl-" + cells[i].cell.replace(/[^A-Za-z0-9_.-]/g, "_") === id) return cells[i];
    }
    return null;
  }

  function fromFragment() {
    var hash = location.hash.slice(1);
    if (hash.indexOf("=") < 0) {
      var old = hash ? byDomId(decode(hash)) : null;
      if (old) show(old, true);
      else if (!hash || !document.getElementById(decode(hash))) apply(false);
      return;
    }
    var params = {};
    hash.split("&").forEach(function (pair) {
      var at = pair.indexOf("=");
      if (at > 0) params[pair.slice(0, at)] = decode(pair.slice(at + 1).replace(/\+/g, " "));
    });
    FIELDS.forEach(function (f) {
      var c = controls[f];
      if (!c) return;
      var v = params[f] || "";
      if (c.tagName === "SELECT" && !Array.prototype.some.call(c.options, function (o) { return o.value === v; })) v = "";
      c.value = v;
    });
    var item = params.cell ? byCell[params.cell] : null;
    if (item) show(item, true);
    else apply(false);
  }

  FIELDS.forEach(function (f) {
    var c = controls[f];
    if (!c) return;
    c.addEventListener(c.tagName === "SELECT" ? "change" : "input", function () {
      apply(false);
      writeFragment();
    });
  });
  var clear = document.getElementById("f-clear");
  if (clear) {
    clear.addEventListener("click", function () {
      FIELDS.forEach(function (f) { if (controls[f]) controls[f].value = ""; });
      apply(false);
      writeFragment();
    });
  }

  heatmap.addEventListener("click", function (event) {
    var square = event.target.closest("button.cell");
    if (!square || !square.hcbenchItem) return;
    show(square.hcbenchItem, false);
    writeFragment();
  });
  // Arrow keys move between the page's visible squares, as on the one-file page.
  heatmap.addEventListener("keydown", function (event) {
    var square = event.target.closest("button.cell");
    if (!square) return;
    var visible = Array.prototype.slice.call(tbody.querySelectorAll("button.cell"));
    var at = visible.indexOf(square);
    var target = null;
    if (event.key === "ArrowRight") target = visible[at + 1];
    else if (event.key === "ArrowLeft") target = visible[at - 1];
    else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      var down = event.key === "ArrowDown";
      var row = Number(square.dataset.row);
      var candidates = visible.filter(function (s) {
        var r = Number(s.dataset.row);
        return s.dataset.col === square.dataset.col && (down ? r > row : r < row);
      });
      if (candidates.length) target = candidates[down ? 0 : candidates.length - 1];
    } else {
      return;
    }
    event.preventDefault();
    if (target) {
      var item = target.hcbenchItem;
      show(item, false);
      if (item.el) item.el.focus();
      writeFragment();
    }
  });
  document.addEventListener("click", function (event) {
    var link = event.target.closest("a.open");
    if (!link) return;
    var cell = decode(link.getAttribute("href").replace(/^#cell=/, ""));
    if (!byCell[cell]) return;
    event.preventDefault();
    show(byCell[cell], true);
    writeFragment();
  });
  window.addEventListener("hashchange", function () {
    if (written !== null && (location.hash === written || (written === "" && location.hash === "#"))) return;
    written = null;
    fromFragment();
  });

  fromFragment();
})();
