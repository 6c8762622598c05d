// hcbench report.html: shows one cell's timeline at a time, filters the cells, sorts tables and
// keeps all of that in the URL fragment. The timelines are in the page as one compressed bundle
// (#timelines-z), inflated once at load into hidden <section>s; from then on this script only
// toggles `hidden`, keeps aria state in step and rewrites the fragment, and fetches nothing.
// A selection made before the bundle is inflated waits for it.
//
// The fragment is `#cell=<cell id>&q=<search>&category=..&split=..&profile=..&outcome=..`
// (each part optional), so a copied address opens the same view. The open cell always stays
// visible, even when the filter would hide it (it is outlined instead): a deep link to a cell
// must show that cell whatever filter travels with it. Plain `#tl-<id>` links (the list of
// cells that did not pass, older reports) and section anchors keep working.
(function () {
  "use strict";
  // A large run's page (report_split.js) draws its heatmap and its list of cells that did not
  // pass from the cell index, a page at a time; this script then only sorts its tables.
  if (document.getElementById("cells-index")) {
    sortableTables();
    return;
  }
  var placeholder = document.getElementById("tl-none");
  var bundle = document.getElementById("timelines-z");
  var root = document.documentElement;
  var timelinesReady = !bundle
    ? Promise.resolve()
    : hcbenchInflate(bundle.textContent).then(
        function (sections) {
          document.getElementById("detail").insertAdjacentHTML("beforeend", sections.join("\n"));
          root.setAttribute("data-timelines", "ready");
        },
        function (e) {
          if (placeholder) placeholder.textContent = "The timelines could not be opened here (" + e.message + "). hcbench replay RUN_DIR shows every cell's, or open this report in a current browser.";
          root.setAttribute("data-timelines", "failed");
        }
      );
  if (!bundle) root.setAttribute("data-timelines", "ready");
  function whenReady(then) {
    timelinesReady.then(then);
  }
  var heatmap = document.querySelector("table.heatmap");
  var shown = null;
  var pinned = null;

  // One pass over the page builds everything the filter needs, so a filter change touches
  // only the elements whose visibility changes (fast with thousands of cells).
  var squares = [];
  var byControls = {};
  var byCell = {};
  var rows = [];
  if (heatmap) {
    Array.prototype.forEach.call(heatmap.tBodies[0].rows, function (tr) {
      var row = { el: tr, squares: [], visible: true };
      rows.push(row);
      Array.prototype.forEach.call(tr.querySelectorAll("button.cell"), function (b) {
        var item = {
          el: b,
          row: row,
          cell: b.dataset.cell,
          caseId: tr.dataset.case,
          category: tr.dataset.category,
          split: tr.dataset.split,
          profile: b.dataset.profile,
          outcome: b.dataset.outcome,
          text: (b.dataset.cell + " " + (b.getAttribute("title") || "")).toLowerCase(),
          visible: true,
        };
        squares.push(item);
        row.squares.push(item);
        byControls[b.getAttribute("aria-controls")] = item;
        byCell[item.cell] = item;
      });
    });
  }
  var failingRows = Array.prototype.map.call(document.querySelectorAll("#failing-table tbody tr"), function (tr) {
    return {
      el: tr,
      cell: tr.dataset.cellId,
      caseId: tr.dataset.case,
      category: tr.dataset.category,
      split: tr.dataset.split,
      profile: tr.dataset.profile,
      outcome: tr.dataset.outcome,
      text: tr.textContent.toLowerCase(),
    };
  });

  var FIELDS = ["q", "category", "split", "profile", "outcome"];
  var controls = {};
  FIELDS.forEach(function (f) { controls[f] = document.getElementById("f-" + f); });
  var count = document.getElementById("f-count");

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
    return !q || item.text.indexOf(q) >= 0;
  }

  function setVisible(obj, visible) {
    if (obj.visible !== visible) {
      obj.visible = visible;
      obj.el.hidden = !visible;
    }
  }

  function applyFilter() {
    var s = state();
    var q = s.q.toLowerCase();
    var matching = 0;
    squares.forEach(function (item) {
      var hit = matches(item, s, q);
      if (hit) matching++;
      setVisible(item, hit || item === pinned);
      item.el.classList.toggle("pinned", item === pinned && !hit);
    });
    rows.forEach(function (row) {
      setVisible(row, row.squares.some(function (i) { return i.visible; }));
    });
    failingRows.forEach(function (r) {
      var visible = matches(r, s, q) || (pinned !== null && r.cell === pinned.cell);
      if (r.el.hidden === visible) r.el.hidden = !visible;
    });
    if (count) {
      var text = matching === squares.length ? squares.length + " cells" : "showing " + matching + " of " + squares.length + " cells";
      if (pinned && !matches(pinned, s, q)) text += " (and the open cell, outside the filter)";
      count.textContent = text;
    }
  }

  // The fragment this script wrote last: its own hashchange is not a navigation.
  var written = null;

  function writeFragment() {
    var s = state();
    var parts = [];
    if (shown && byControls[shown.id]) parts.push("cell=" + encodeURIComponent(byControls[shown.id].cell));
    FIELDS.forEach(function (f) {
      if (s[f]) parts.push(f + "=" + encodeURIComponent(s[f]));
    });
    var hash = parts.length ? "#" + parts.join("&") : "";
    if (hash === location.hash || (hash === "" && location.hash === "#")) return;
    written = hash;
    // replace, not push: filtering is not a page the back button should step through. An
    // empty fragment is written as no fragment, since navigating to `#` scrolls to the top.
    var url = location.href.split("#")[0] + hash;
    try {
      history.replaceState(history.state, "", url);
    } catch (e) {
      location.replace(hash || "#");
    }
  }

  // Shows the timeline section `id`; returns it, or null when there is no such section.
  function show(id) {
    var section = document.getElementById(id);
    if (!section || !section.classList.contains("timeline")) return null;
    if (shown && shown !== section) {
      shown.hidden = true;
      var previous = byControls[shown.id];
      if (previous) previous.el.setAttribute("aria-expanded", "false");
    }
    section.hidden = false;
    shown = section;
    if (placeholder) placeholder.hidden = true;
    var item = byControls[id];
    if (item) item.el.setAttribute("aria-expanded", "true");
    pinned = item || null;
    applyFilter();
    var panel = document.getElementById("detail");
    if (panel) {
      panel.scrollTop = 0;
      // A square low on the screen would open a timeline whose start is out of sight.
      var box = panel.getBoundingClientRect();
      if (box.top > window.innerHeight * 0.6 || box.bottom < 0) panel.scrollIntoView({ block: "start" });
    }
    return section;
  }

  // From outside the heatmap (a link in the failing table, or the URL's #fragment) the
  // timeline is brought into view and focused, as following a link would.
  function reveal(id) {
    var section = show(id);
    if (!section) return;
    var item = byControls[id];
    (item ? item.el : section).scrollIntoView({ block: "center" });
    var heading = section.querySelector("h3");
    if (heading) heading.focus({ preventScroll: true });
  }

  // A hand-edited address may hold a broken %-escape: keep the text as it is then.
  function decode(text) {
    try {
      return decodeURIComponent(text);
    } catch (e) {
      return text;
    }
  }

  // Reads the fragment: filter state and an open cell, or an old-style `#tl-...` id.
  function fromFragment() {
    var hash = location.hash.slice(1);
    if (hash.indexOf("=") < 0) {
      if (hash) reveal(decode(hash));
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
      // A value the select does not offer (another report's category) falls back to "all".
      if (c.tagName === "SELECT" && !Array.prototype.some.call(c.options, function (o) { return o.value === v; })) v = "";
      c.value = v;
    });
    var item = params.cell ? byCell[params.cell] : null;
    if (item) reveal(item.el.getAttribute("aria-controls"));
    else applyFilter();
  }

  FIELDS.forEach(function (f) {
    var c = controls[f];
    if (!c) return;
    c.addEventListener(c.tagName === "SELECT" ? "change" : "input", function () {
      applyFilter();
      writeFragment();
    });
  });
  var clear = document.getElementById("f-clear");
  if (clear) {
    clear.addEventListener("click", function () {
      FIELDS.forEach(function (f) { if (controls[f]) controls[f].value = ""; });
      applyFilter();
      writeFragment();
    });
  }

  if (heatmap) {
    heatmap.addEventListener("click", function (event) {
      var square = event.target.closest("button.cell");
      if (!square) return;
      whenReady(function () {
        show(square.getAttribute("aria-controls"));
        writeFragment();
      });
    });
    // Arrow keys move between visible squares: left/right along the row, up/down to the
    // nearest square of the same profile in the next visible case.
    heatmap.addEventListener("keydown", function (event) {
      var square = event.target.closest("button.cell");
      if (!square) return;
      var visible = squares.filter(function (i) { return i.visible; }).map(function (i) { return i.el; });
      var at = visible.indexOf(square);
      var target = null;
      if (event.key === "ArrowRight") target = visible[at + 1];
      else if (event.key === "ArrowLeft") target = visible[at - 1];
      else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        var down = event.key === "ArrowDown";
        var col = square.dataset.col;
        var inSlot = visible.filter(function (s) { return s.parentNode === square.parentNode; }).indexOf(square);
        var row = Number(square.dataset.row);
        var candidates = visible.filter(function (s) {
          var r = Number(s.dataset.row);
          return s.dataset.col === col && (down ? r > row : r < row);
        });
        if (candidates.length) {
          var next = Number(candidates[down ? 0 : candidates.length - 1].dataset.row);
          var slot = candidates.filter(function (s) { return Number(s.dataset.row) === next; });
          target = slot[Math.min(inSlot, slot.length - 1)];
        }
      } else {
        return;
      }
      event.preventDefault();
      if (target) {
        target.focus();
        whenReady(function () {
          show(target.getAttribute("aria-controls"));
          writeFragment();
        });
      }
    });
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a.open");
    if (!link) return;
    event.preventDefault();
    whenReady(function () {
      reveal(link.getAttribute("href").slice(1));
      writeFragment();
    });
  });

  function sortableTables() {
    // Sortable tables: each column header becomes a button; numbers sort as numbers (the first
    // number in the cell: 83.3% -> 83.3, 1,234 / 56 -> 1234), text as text, empty and "–" last.
    function sortKey(cell) {
      var text = (cell.dataset.sort || cell.textContent).trim();
      var m = text.replace(/,/g, "").match(/^[$+]?(-?\d+(?:\.\d+)?)/);
      return m ? { n: parseFloat(m[1]), s: text } : { n: null, s: text.toLowerCase() };
    }
    function compare(a, b) {
      var ea = a.s === "" || a.s === "–", eb = b.s === "" || b.s === "–";
      if (ea !== eb) return ea ? 1 : -1;
      if (a.n !== null && b.n !== null) return a.n - b.n;
      if ((a.n === null) !== (b.n === null)) return a.n === null ? 1 : -1;
      return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
    }
    // The ablation tables are sortable too (selected by their section, so their markup, which
    // other tests pin, stays as it is).
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable, #ablation table.data"), function (table) {
      var head = table.tHead && table.tHead.rows[0];
      if (!head || !table.tBodies[0]) return;
      Array.prototype.forEach.call(head.cells, function (th, index) {
        var button = document.createElement("button");
        button.type = "button";
        button.className = "sort";
        while (th.firstChild) button.appendChild(th.firstChild);
        th.appendChild(button);
        button.addEventListener("click", function () {
          var ascending = th.getAttribute("aria-sort") !== "ascending";
          Array.prototype.forEach.call(head.cells, function (h) { h.removeAttribute("aria-sort"); });
          th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
          var body = table.tBodies[0];
          var keyed = Array.prototype.map.call(body.rows, function (tr, i) {
            return { tr: tr, key: sortKey(tr.cells[index] || tr), i: i };
          });
          keyed.sort(function (a, b) {
            var c = compare(a.key, b.key);
            if (c !== 0) return ascending ? c : -c;
            return a.i - b.i;
          });
          var fragment = document.createDocumentFragment();
          keyed.forEach(function (k) { fragment.appendChild(k.tr); });
          body.appendChild(fragment);
        });
      });
    });
  }
  sortableTables();

  window.addEventListener("hashchange", function () {
    if (written !== null && (location.hash === written || (written === "" && location.hash === "#"))) return;
    written = null;
    whenReady(fromFragment);
  });

  whenReady(fromFragment);
})();
