/* A table wider than the text column scrolls sideways in its box; a phone shows no scrollbar until the table is
 * touched, so a line above the box says so, and the box's right edge is shaded. Checked on load, on resize and
 * whenever a fold (details) opens. tests/test_layout.py finds any scrolling table without it. */
(function () {
  "use strict";
  function scroller(table) {
    for (var box = table.parentElement; box && box !== document.body; box = box.parentElement) {
      var ox = getComputedStyle(box).overflowX;
      if (ox === "auto" || ox === "scroll") return box;
    }
    return null;
  }
  function mark() {
    document.querySelectorAll("main table").forEach(function (table) {
      var box = scroller(table);
      if (!box) return;
      var wide = box.scrollWidth > box.clientWidth + 1, prev = box.previousElementSibling;
      var hint = prev && prev.classList.contains("andrea-scroll-hint") ? prev : null;
      if (wide && !hint) {
        hint = document.createElement("p");
        hint.className = "andrea-scroll-hint";
        hint.textContent = "This table is wider than the page: scroll it sideways →";
        box.parentElement.insertBefore(hint, box);
      }
      if (hint) hint.hidden = !wide;
      box.classList.toggle("andrea-scrolls", wide);
    });
  }
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);
})();
