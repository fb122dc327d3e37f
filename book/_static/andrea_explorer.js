/* The gradient-flow explorer on the book's site: its controls, and where each curve comes from.
 *
 * andrea.views.static_explorer writes the chart (a Vega-Lite spec whose dataset "rows" holds the shipped
 * torch measurements of the static grid) and calls AndreaExplorer.mount. A setting on the grid is
 * drawn from those rows at once. Any other setting (any lambda_0, any depth 1-96, width, seed) is
 * measured in the page: andrea_worker.js runs ANDREA's forward and backward pass on TensorFlow.js,
 * off the main thread, and its rows are added to the chart's data. The line under the chart says
 * which curve came from where.
 */
(function () {
  "use strict";
  var WIDTHS = [32, 64, 96, 128];
  var LOG_LAM = {min: -6, max: 0, step: 0.05};
  var worker = null, workerProblem = null, nextId = 1, callbacks = {};

  function staticUrl(file) {
    var rootAttr = document.documentElement.getAttribute("data-content_root") || "";
    return new URL(rootAttr + "_static/" + file, window.location.href).href;
  }

  function getWorker() {
    if (worker || workerProblem) return worker;
    try {
      worker = new Worker(staticUrl("andrea_worker.js"));
      worker.onmessage = function (e) {
        var cb = callbacks[e.data.id];
        delete callbacks[e.data.id];
        if (cb) cb(e.data);
      };
      worker.onerror = function (e) {
        workerProblem = "the page's model did not start (" + (e.message || "a Web Worker error") + ")";
        Object.keys(callbacks).forEach(function (id) { callbacks[id]({error: workerProblem}); delete callbacks[id]; });
        e.preventDefault();
      };
    } catch (e) {
      workerProblem = window.location.protocol === "file:"
        ? "live computation needs the site served over http (make serve), not opened as a file"
        : "this browser could not start a Web Worker (" + e.message + ")";
    }
    return worker;
  }

  /* Start the page's model before it is needed: once an explorer has come into view, the Web Worker
   * loads TensorFlow.js and measures a one-block model (which also compiles its code paths), so that a
   * reader's first change of a control waits for the measurement, not for the load. */
  function warmWhenSeen(el) {
    function warm() { var w = getWorker(); if (w) w.postMessage({id: 0, setting: {depth: 1, width: 32}}); }
    if (!("IntersectionObserver" in window)) { warm(); return; }
    var seen = new IntersectionObserver(function (entries) {
      if (!entries.some(function (e) { return e.isIntersecting; })) return;
      seen.disconnect();
      warm();
    });
    seen.observe(el);
  }

  function measure(setting, done) {
    var w = getWorker();
    if (!w) { done({error: workerProblem}); return; }
    var id = nextId++;
    callbacks[id] = done;
    w.postMessage({id: id, setting: setting});
  }

  function round3(v) { return Number(v.toPrecision(3)); }
  function lamLabel(v) { return v === null ? "off" : AndreaFlow.formatG(v); }
  function key(s) { return [lamLabel(s.layerscale), s.depth, s.norm, s.residual ? "on" : "off", s.width, s.seed].join("|"); }
  function rowKey(r) {
    return [r.lam, r.depth, r.norm, r.res, r.width === undefined ? 128 : r.width, r.seed === undefined ? 0 : r.seed].join("|");
  }
  function reference(s) { return {layerscale: null, depth: s.depth, norm: "pre", residual: true, width: s.width, seed: s.seed}; }

  function rowsOf(s, r) {
    var rows = [], ok = function (v) { return isFinite(v) && v > 0 ? v : null; };
    for (var b = 0; b <= s.depth; b++)
      rows.push({lam: lamLabel(s.layerscale), depth: s.depth, norm: s.norm, res: s.residual ? "on" : "off",
                 width: s.width, seed: s.seed, boundary: b, grad: ok(r.grad[b]), act: ok(r.act[b]),
                 status: r.status, ratio: isFinite(r.ratio) ? r.ratio : null});
    return rows;
  }

  function html(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function radios(box, name, options, value, label) {
    var field = html("fieldset", {"class": "andrea-control"});
    field.appendChild(html("legend", {}, label));
    options.forEach(function (o) {
      var l = html("label"), i = html("input", {type: "radio", name: name, value: o});
      if (o === value) i.checked = true;
      l.appendChild(i);
      l.appendChild(document.createTextNode(" " + o));
      field.appendChild(l);
    });
    box.appendChild(field);
  }

  /* The controls, set to the chapter's setting. */
  function controls(el, start) {
    var box = html("div", {"class": "andrea-controls"}), id = el.id;
    var lam = html("div", {"class": "andrea-control"});
    var lamOn = html("input", {type: "checkbox", name: "lam-on", id: id + "-lam-on"});
    lamOn.checked = start.layerscale !== null;
    var lamL = html("label", {"for": id + "-lam-on"}, "LayerScale λ₀ ");
    var logLam = html("input", {type: "range", name: "loglam", min: LOG_LAM.min, max: LOG_LAM.max, step: LOG_LAM.step,
                                "aria-label": "log10 of LayerScale λ₀"});
    logLam.value = start.layerscale === null ? -4 : Math.log10(start.layerscale);
    var lamOut = html("output", {name: "lam-value"});
    lam.appendChild(lamOn); lam.appendChild(lamL); lam.appendChild(logLam); lam.appendChild(lamOut);
    box.appendChild(lam);

    var dep = html("div", {"class": "andrea-control"});
    dep.appendChild(html("label", {"for": id + "-depth"}, "depth "));
    var depth = html("input", {type: "range", name: "depth", id: id + "-depth", min: 1, max: 96, step: 1});
    depth.value = start.depth;
    var depOut = html("output", {name: "depth-value"});
    dep.appendChild(depth); dep.appendChild(depOut);
    box.appendChild(dep);

    radios(box, "norm", ["pre", "post", "none"], start.norm, "norm");
    radios(box, "res", ["on", "off"], start.residual ? "on" : "off", "residual");

    var wid = html("div", {"class": "andrea-control"});
    wid.appendChild(html("label", {"for": id + "-width"}, "width "));
    var width = html("select", {name: "width", id: id + "-width"});
    WIDTHS.forEach(function (w) { var o = html("option", {value: w}, String(w)); if (w === (start.width || 128)) o.selected = true; width.appendChild(o); });
    wid.appendChild(width);
    var seedL = html("label", {"for": id + "-seed"}, " seed ");
    var seed = html("input", {type: "number", name: "seed", id: id + "-seed", min: 0, max: 10000, step: 1, value: 0});
    wid.appendChild(seedL); wid.appendChild(seed);
    box.appendChild(wid);
    radios(box, "yfix", ["fit", "fixed"], "fit", "y-axes");  // fixed: the shipped grid's whole range
    return box;
  }

  function readSetting(box) {
    var q = function (sel) { return box.querySelector(sel); };
    var on = q("input[name=lam-on]").checked, logLam = Number(q("input[name=loglam]").value);
    var seedText = q("input[name=seed]").value.trim(), seed = Number(seedText);
    if (!/^\d+$/.test(seedText) || seed > 10000)
      return {error: "seed must be a whole number from 0 to 10000, got " + JSON.stringify(seedText)};
    return {
      layerscale: on ? round3(Math.pow(10, logLam)) : null,
      depth: Number(q("input[name=depth]").value),
      norm: q("input[name=norm]:checked").value,
      residual: q("input[name=res]:checked").value === "on",
      width: Number(q("select[name=width]").value),
      seed: seed,
      yfix: q("input[name=yfix]:checked").value,
    };
  }

  function describeBackend(r) {
    return "TensorFlow.js " + r.version + ", " + (r.backend === "wasm" ? "WebAssembly" : "plain JavaScript") + " backend";
  }

  /* The chart's layout for a column ``avail`` px wide. Wide enough for both panels side by side
   * (``wideNeeds``, measured once drawn): the spec as written. Narrower (a phone): the two panels
   * stacked, each as wide as the column allows, and the readout in its short form, wrapped onto two
   * lines where even that does not fit. Returns a new spec; ``spec`` is left as it is. */
  function shaped(spec, opts, avail, wideNeeds, panelCut) {
    if (avail >= wideNeeds) return spec;
    var out = Object.assign({}, spec), w = Math.max(160, avail - 90 - (panelCut || 0));
    var row = spec.vconcat[0].hconcat, readout = Object.assign({}, spec.vconcat[1]);
    out.vconcat = [Object.assign({}, row[0], {width: w}), Object.assign({}, row[1], {width: w}), readout];
    var text = opts.readoutShort, chars = (text + "1.23e-10×").length;
    readout.width = w;
    readout.mark = Object.assign({}, readout.mark, {fontSize: 11});
    if (chars * 6.8 > w + 60) {  // about 6.8 px a character at 11 px bold: wrap after the "/"
      text = text.replace(/\/\s*/, "/\n");
      readout.mark.lineBreak = "\n";
      readout.height = 34;
    }
    // the legend's two entries one above the other: side by side they are wider than a small phone
    var config = spec.config || {};
    out.config = Object.assign({}, config, {legend: Object.assign({}, config.legend, {direction: "vertical"})});
    out.params = spec.params.map(function (p) { return p.name === "readout" ? Object.assign({}, p, {value: text}) : p; });
    return out;
  }

  function mount(el, spec, opts) {
    var start = opts.start;
    // The page's own controls replace the chart's bound ones.
    spec.params.forEach(function (p) { delete p.bind; });
    var box = controls(el, start);
    var chart = html("div", {"class": "andrea-explorer-chart"});
    var prov = html("p", {"class": "andrea-explorer-provenance", "aria-live": "polite"});
    el.appendChild(box); el.appendChild(chart); el.appendChild(prov);

    // the column's width for the chart (the card's content box), and the wide layout's own width
    var wideNeeds = 640, shownAt = null, liveRows = [], drawnSetting = Object.assign({seed: 0, yfix: "fit"}, start);
    function avail() { return chart.clientWidth; }

    /* Draw the chart for the column's width into a fresh box, which replaces the last one once drawn
     * (with the rows measured in the page so far, and the setting now shown). */
    function embed(panelCut) {
      var at = avail(), target = html("div", {"class": "andrea-explorer-plot"});
      var layout = at >= wideNeeds ? "wide" : "narrow";
      shownAt = {width: at, layout: layout};
      chart.appendChild(target);
      return vegaEmbed(target, shaped(spec, opts, at, wideNeeds, panelCut), {renderer: "svg", actions: false}).then(function (res) {
        [].slice.call(chart.children).forEach(function (c) { if (c !== target) c.remove(); });
        if (liveRows.length) res.view.change("rows", vega.changeset().insert(liveRows));
        var svg = target.querySelector("svg"), drawn = svg ? svg.getBoundingClientRect().width : 0;
        el.setAttribute("data-layout", layout);
        return {res: res, drawn: drawn, layout: layout, at: at};
      });
    }

    /* Keep the chart just drawn; if it is wider than the column (the wide layout measured too wide,
     * or a stacked panel's axis labels longer than allowed for), draw it once more, narrower. */
    var view = null, cutOnce = false;
    function fit(r) {
      if (view && view !== r.res.view) view.finalize();
      view = r.res.view;
      window.andreaExplorers = window.andreaExplorers || {};
      window.andreaExplorers[el.id] = view;
      if (r.layout === "wide") wideNeeds = Math.ceil(r.drawn);
      // (a column of no width is a card not shown yet: it is drawn again once it has one)
      if (r.at === 0 || r.drawn <= r.at + 1) { cutOnce = false; return view; }
      if (r.layout === "wide") return embed().then(fit);
      if (cutOnce) return view;
      cutOnce = true;
      return embed(Math.ceil(r.drawn - r.at)).then(fit);
    }

    function setSignals(v, s) {
      return v.signal("lam", lamLabel(s.layerscale)).signal("depth", s.depth).signal("norm", s.norm)
        .signal("res", s.residual ? "on" : "off").signal("model_width", s.width).signal("seed", s.seed)
        .signal("yfix", s.yfix || "fit");
    }

    embed().then(fit).then(function () {
      var have = {};
      view.data("rows").forEach(function (r) { have[rowKey(r)] = true; });
      var wanted = null, busy = false, t0 = null, liveInfo = {};

      function labels(s) {
        box.querySelector("output[name=lam-value]").textContent = s.layerscale === null ? "off" : lamLabel(s.layerscale);
        box.querySelector("input[name=loglam]").disabled = s.layerscale === null;
        box.querySelector("output[name=depth-value]").textContent = String(s.depth);
      }

      function say(s, state, text) {
        el.setAttribute("data-state", state);
        el.setAttribute("data-setting", key(s));
        prov.textContent = text;
        // where the numbers come from, for a maintainer: on hover, never in the reader's line
        prov.title = s.width === 128
          ? "The shipped grid: andrea/results, computed by `make experiments` (width 128, seed 0); see the evidence pages."
          : "Measured by andrea.measure.probe when the book was built (width " + s.width + ", seed 0).";
      }

      function provenance(s) {
        var cur = liveInfo[key(s)], ref = liveInfo[key(reference(s))];
        // a curve not computed in the page is the shipped grid's (width 128) or, at the width a chapter
        // opens at, measured with PyTorch when the page was built
        var shipped = "measured in PyTorch when the book was built (width " + s.width + ", seed 0)";
        if (!cur && !ref) return "Shown: " + shipped + ".";
        var info = cur || ref;
        var text = "Shown: " + (cur ? "this setting" : "the reference") + " computed in this page by " + describeBackend(info) +
          ", one forward and backward pass in " + Math.round(info.ms) + " ms";
        if (cur && ref && cur !== ref) text += " (the reference too, in " + Math.round(ref.ms) + " ms)";
        else if (s.layerscale !== null || s.norm !== "pre" || !s.residual) text += "; " + (cur ? "the reference was " : "this setting was ") + shipped;
        return text + ". The page draws its own seeded initialisation, so seed " + s.seed +
          " here is a different draw from torch's seed " + s.seed + ".";
      }

      function draw(s, pending) {
        drawnSetting = s;
        return setSignals(view, s).runAsync().then(function () {
          return new Promise(function (ok) { requestAnimationFrame(function () { ok(); }); });
        }).then(function () {
          if (wanted !== null && key(wanted) !== key(s)) return;  // a newer setting is on its way
          if (t0 !== null) {  // control change to redrawn chart, for make bench
            el.setAttribute("data-update-ms", String(Math.round(performance.now() - t0)));
            t0 = null;
          }
          if (pending) {
            say(s, "computing", "This setting computed in the page; computing the grey reference (pre-norm, no LayerScale) …");
            return;
          }
          say(s, liveInfo[key(s)] || liveInfo[key(reference(s))] ? "live" : "shipped", provenance(s));
          chart.classList.remove("andrea-computing");
          wanted = null;
        });
      }

      function work() {
        if (busy || wanted === null) return;
        var s = wanted, need = [s, reference(s)].filter(function (x) { return !have[key(x)]; });
        if (!need.length) { draw(s, false); return; }
        busy = true;
        var one = need[0];
        measure(one, function (msg) {
          busy = false;
          if (msg.error) {
            if (wanted && key(wanted) === key(s)) {
              say(s, "error", "Could not compute this setting in the page: " + msg.error +
                ". The controls still show every setting of the shipped grid.");
              chart.classList.remove("andrea-computing");
              wanted = null;
            }
            work();
            return;
          }
          var rows = rowsOf(one, msg.result);
          liveRows = liveRows.concat(rows);  // kept, for a chart drawn again at another width
          view.change("rows", vega.changeset().insert(rows));
          have[key(one)] = true;
          liveInfo[key(one)] = msg.result;
          if (wanted && key(wanted) === key(s) && key(one) === key(s) && need.length > 1) draw(s, true);
          work();
        });
      }

      function update() {
        var s = readSetting(box);
        if (s.error) { say(wanted || start, "error", s.error); return; }
        labels(s);
        t0 = performance.now();
        wanted = s;
        var need = [s, reference(s)].filter(function (x) { return !have[key(x)]; });
        if (need.length) {
          say(s, "computing", "Computing this setting in the page (ANDREA's forward and backward pass, TensorFlow.js)…");
          chart.classList.add("andrea-computing");
        } else {
          el.setAttribute("data-state", "drawing");  // a shipped setting: drawn on the next frame
        }
        work();
      }

      box.addEventListener("input", update);
      box.addEventListener("change", update);
      labels(start);
      say(start, "shipped", provenance(start));
      el.setAttribute("data-ready", "1");
      warmWhenSeen(el);
      relayoutWhenResized();
    }).catch(function (err) { chart.textContent = "Chart error: " + err; console.error(err); });

    /* A column that changes width (a phone turned, a window resized, a card first shown) gets the
     * chart drawn again for its new width, with the setting shown and every row measured so far. */
    function relayoutWhenResized() {
      if (!("ResizeObserver" in window)) return;
      var timer = null, busy = false;
      function relayout() {
        if (busy) return;
        var at = avail(), layout = at >= wideNeeds ? "wide" : "narrow";
        if (at === 0 || (layout === shownAt.layout && (layout === "wide" || Math.abs(at - shownAt.width) < 12))) return;
        busy = true;
        el.setAttribute("data-relayout", "drawing");
        embed().then(fit).then(function () {
          return setSignals(view, drawnSetting).runAsync();
        }).then(function () {
          busy = false;
          el.setAttribute("data-relayout", "done");
          relayout();  // the width may have changed again meanwhile
        }).catch(function (err) { busy = false; console.error(err); });
      }
      new ResizeObserver(function () { clearTimeout(timer); timer = setTimeout(relayout, 120); }).observe(chart);
    }
  }

  window.AndreaExplorer = {mount: mount, key: key, lamLabel: lamLabel};
})();
