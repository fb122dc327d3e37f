/* A table or a displayed formula wider than the text column scrolls sideways in its box; a phone shows no
 * scrollbar until the box is touched, so a line above the box says so, and the box's right edge is shaded.
 * Checked on load, once MathJax has typeset the page, on resize and whenever a fold (details) opens.
 * tests/test_layout.py finds any scrolling table or formula without it. */
(function () {
  "use strict";
  function scroller(el) {
    for (var box = el; box && box !== document.body; box = box.parentElement) {
      var ox = getComputedStyle(box).overflowX;
      if (ox === "auto" || ox === "scroll") return box;
    }
    return null;
  }
  function hintFor(box, what) {
    var wide = box.scrollWidth > box.clientWidth + 1, prev = box.previousElementSibling;
    var hint = prev && prev.classList.contains("andrea-scroll-hint") ? prev : null;
    if (wide && !hint) {
      hint = document.createElement("p");
      hint.className = "andrea-scroll-hint";
      hint.textContent = "This " + what + " is wider than the page: scroll it sideways →";
      box.parentElement.insertBefore(hint, box);
    }
    if (hint) hint.hidden = !wide;
    box.classList.toggle("andrea-scrolls", wide);
  }
  function mark() {
    document.querySelectorAll("main table").forEach(function (table) {
      var box = scroller(table.parentElement);
      if (box) hintFor(box, "table");
    });
    // a displayed formula (MathJax) scrolls in its own container (andrea.css)
    document.querySelectorAll('main mjx-container[display="true"]').forEach(function (math) {
      var box = scroller(math);
      if (box) hintFor(box, "formula");
    });
  }
  window.addEventListener("load", function () {
    mark();
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(mark);
  });
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);
})();
