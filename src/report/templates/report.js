// hcbench report.html: shows one cell's timeline at a time. Every timeline is already in the
// page as a hidden <section>; this script only toggles `hidden` and keeps the selected square's
// aria-expanded in step, so the page has no data to parse and nothing to fetch.
(function () {
  "use strict";
  var placeholder = document.getElementById("tl-none");
  var shown = null;

  function squareFor(id) {
    var squares = document.querySelectorAll("button.cell");
    for (var i = 0; i < squares.length; i++) {
      if (squares[i].getAttribute("aria-controls") === id) return squares[i];
    }
    return null;
  }

  // Shows the timeline section `id`; returns it, or null when there is no such section.
  function show(id) {
    var section = document.getElementById(id);
    if (!section || !section.classList.contains("timeline")) return null;
    if (shown && shown !== section) {
      shown.hidden = true;
      var previous = squareFor(shown.id);
      if (previous) previous.setAttribute("aria-expanded", "false");
    }
    section.hidden = false;
    shown = section;
    if (placeholder) placeholder.hidden = true;
    var square = squareFor(id);
    if (square) square.setAttribute("aria-expanded", "true");
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
    var square = squareFor(id);
    (square || section).scrollIntoView({ block: "center" });
    var heading = section.querySelector("h3");
    if (heading) heading.focus({ preventScroll: true });
  }

  var heatmap = document.querySelector("table.heatmap");
  if (heatmap) {
    heatmap.addEventListener("click", function (event) {
      var square = event.target.closest("button.cell");
      if (square) show(square.getAttribute("aria-controls"));
    });
    // Arrow keys move between squares: left/right along the row, up/down to the nearest
    // square of the same profile in the next case.
    heatmap.addEventListener("keydown", function (event) {
      var square = event.target.closest("button.cell");
      if (!square) return;
      var squares = Array.prototype.slice.call(heatmap.querySelectorAll("button.cell"));
      var at = squares.indexOf(square);
      var target = null;
      if (event.key === "ArrowRight") target = squares[at + 1];
      else if (event.key === "ArrowLeft") target = squares[at - 1];
      else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        var row = Number(square.dataset.row) + (event.key === "ArrowDown" ? 1 : -1);
        var col = square.dataset.col;
        var slot = squares.filter(function (s) { return Number(s.dataset.row) === row && s.dataset.col === col; });
        var inSlot = Array.prototype.indexOf.call(square.parentNode.children, square);
        target = slot[Math.min(inSlot, slot.length - 1)];
      } else {
        return;
      }
      event.preventDefault();
      if (target) {
        target.focus();
        show(target.getAttribute("aria-controls"));
      }
    });
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a.open");
    if (!link) return;
    event.preventDefault();
    reveal(link.getAttribute("href").slice(1));
  });

  if (location.hash.length > 1) reveal(decodeURIComponent(location.hash.slice(1)));
})();
