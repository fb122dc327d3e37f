/* "Train it yourself": two small ANDREA runs, A and B, trained side by side in the reader's browser.
 *
 * andrea.views.train_panel writes the panel's element and its options (the two runs' default
 * settings, the limits, the corpus's URL, any torch reference curves) and calls
 * AndreaTrainPanel.mount. The training runs in andrea_train_worker.js (TensorFlow.js, off the main
 * thread), one optimizer step at a time as andrea.train takes it; each step's loss is drawn as it
 * arrives, against the unigram level of the text (the plateau). With LayerScale on, the mean |λ| of
 * each block is drawn too. A setting outside the limits is refused by name and nothing trains.
 */
(function () {
  "use strict";
  var FIELDS = [  // [key, label, kind, options]
    ["depth", "depth", "int"], ["width", "width", "choice", [32, 64]], ["norm", "norm", "choice", ["pre", "post"]],
    ["init", "initialisation", "choice", ["xavier", "gpt2"]],
    ["layerscale", "LayerScale λ₀ (empty: off)", "lambda"], ["lr", "peak learning rate", "real"],
    ["warmup", "warmup steps", "int"], ["steps", "steps", "int"],
  ];
  var COLORS = {A: "#0072B2", B: "#D55E00"};

  function staticUrl(file) {
    var rootAttr = document.documentElement.getAttribute("data-content_root") || "";
    return new URL(rootAttr + "_static/" + file, window.location.href).href;
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* A run's settings from its form, checked against the panel's limits; an Error names every bad value. */
  function readRun(name, inputs, limits) {
    var out = {}, errors = [];
    FIELDS.forEach(function (f) {
      var raw = inputs[f[0]].value.trim(), v;
      if (f[2] === "choice") v = typeof f[3][0] === "number" ? Number(raw) : raw;
      else if (f[2] === "lambda") v = raw === "" ? null : Number(raw);
      else v = Number(raw);
      var lim = limits[f[0]], bad = function (allowed) {
        errors.push(f[1] + " must be " + allowed + ", got " + JSON.stringify(raw));
      };
      if (f[2] === "int" && !(raw !== "" && Number.isInteger(v) && v >= lim[0] && v <= lim[1]))
        bad("an integer from " + lim[0] + " to " + lim[1]);
      if (f[2] === "real" && !(raw !== "" && isFinite(v) && v >= lim[0] && v <= lim[1]))
        bad("a number from " + lim[0] + " to " + lim[1]);
      if (f[2] === "lambda" && v !== null && !(isFinite(v) && v >= lim[0] && v <= lim[1]))
        bad("empty (off) or a number from " + lim[0] + " to " + lim[1]);
      out[f[0]] = v;
    });
    if (!errors.length && out.warmup > out.steps)
      errors.push("warmup steps (" + out.warmup + ") must not exceed the steps (" + out.steps + ")");
    if (errors.length) throw new Error("run " + name + ": " + errors.join("; "));
    return out;
  }

  function message(s, fixed) {
    return {
      name: s.name,
      model: {vocab: 256, context: fixed.context || fixed.seqLen, width: s.width, heads: s.width / fixed.headDim,
              depth: s.depth, norm: s.norm, init: s.init, residual: true, layerscale: s.layerscale, seed: fixed.seed},
      train: {steps: s.steps, batchSize: fixed.batchSize, seqLen: fixed.seqLen, lr: s.lr, warmup: s.warmup,
              minLrRatio: 0.1, weightDecay: 0.1, beta1: 0.9, beta2: 0.95, gradClip: 1.0},
    };
  }

  /* Round tick values from lo to hi, about five: steps of 1, 2 or 5 times a power of ten. */
  function niceTicks(lo, hi) {
    var raw = (hi - lo) / 5, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    var step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p, out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Number(v.toPrecision(6)));
    return out;
  }

  /* The chart: the loss of each run against the step, the unigram level dashed, and (optional)
   * reference curves from torch, thin. A plain SVG, redrawn as steps arrive. */
  /* The chart's width in its own units: the width it is shown at (at most 640), so that its 12-unit text is
   * shown at 12 px on a phone too. */
  function shownWidth(svg) {
    var w = svg.getBoundingClientRect().width || (svg.parentNode && svg.parentNode.clientWidth) || 640;
    return Math.round(Math.max(280, Math.min(640, w)));
  }

  function drawLoss(svg, series, unigram, refs, fixedY) {
    var W = shownWidth(svg), H = 300, L = 52, R = 12, T = 12, B = 40;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var pts = [];
    Object.keys(series).forEach(function (k) { pts = pts.concat(series[k].points); });
    refs.forEach(function (r) { pts = pts.concat(r.points); });
    var maxStep = Math.max(10, Math.max.apply(null, pts.map(function (p) { return p[0]; }).concat([0])));
    if (maxStep > 100) maxStep = Math.ceil(maxStep / 50) * 50;  // the axis ends on a round step
    var ys = pts.map(function (p) { return p[1]; }).filter(isFinite).concat(unigram ? [unigram] : []);
    var lo = fixedY ? fixedY[0] : Math.min.apply(null, ys.concat([2])) - 0.1;
    var hi = fixedY ? fixedY[1] : Math.max.apply(null, ys.concat([3])) + 0.1;
    var x = function (s) { return L + (W - L - R) * s / maxStep; };
    var y = function (v) { return T + (H - T - B) * (1 - (Math.min(hi, Math.max(lo, v)) - lo) / (hi - lo)); };
    var ns = "http://www.w3.org/2000/svg";
    function add(tag, attrs, text) {
      var e = document.createElementNS(ns, tag);
      Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
      return e;
    }
    add("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#888"});
    add("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#888"});
    niceTicks(lo, hi).forEach(function (v) {
      add("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 12, fill: "currentColor"}, String(v));
    });
    niceTicks(0, maxStep).forEach(function (s) {
      add("text", {x: x(s), y: H - B + 16, "text-anchor": "middle", "font-size": 12, fill: "currentColor"}, String(s));
    });
    add("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, fill: "currentColor"}, "step");
    add("text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 12, fill: "currentColor",
                 transform: "rotate(-90 14 " + (T + H - B) / 2 + ")"}, "training loss (nats per byte)");
    if (unigram) {
      add("line", {x1: L, y1: y(unigram), x2: W - R, y2: y(unigram), stroke: "#666", "stroke-dasharray": "2 3",
                   class: "andrea-train-unigram"});  // named in the legend below the chart, never over the curves
    }
    function path(points, attrs) {
      var d = points.filter(function (p) { return isFinite(p[1]); })
        .map(function (p, j) { return (j ? "L" : "M") + x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1); }).join("");
      if (d) add("path", Object.assign({d: d, fill: "none"}, attrs));
    }
    refs.forEach(function (r) { path(r.points, {stroke: COLORS[r.run] || "#999", "stroke-width": 1, opacity: 0.45}); });
    Object.keys(series).forEach(function (k) {
      path(series[k].points, {stroke: COLORS[k], "stroke-width": 2, "stroke-dasharray": k === "B" ? "6 3" : "",
                              "data-run": k, class: "andrea-train-curve"});
      var last = series[k].points[series[k].points.length - 1];
      if (last) add("text", {x: Math.min(W - R - 10, x(last[0]) + 4), y: y(last[1]) - 4, "font-size": 12, fill: COLORS[k]}, k);
    });
  }

  /* A log axis's labels in the explorers' one format: 1e-7, 2e-3, 1, 1e1. */
  function logLabel(v) { return v.toExponential(0).replace("e+", "e").replace(/e0$/, ""); }

  /* The λ chart: the mean |λ| of each block (block 1 at the left) at the latest step, and each run's λ₀ (where
   * every block starts) dotted, so that the gap between them is how far training has grown each block's λ. */
  function drawLambda(svg, lambdas, starts) {
    var W = shownWidth(svg), H = 160, L = 52, R = 12, T = 10, B = 34, ns = "http://www.w3.org/2000/svg";
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var runs = Object.keys(lambdas).filter(function (k) { return lambdas[k]; });
    svg.style.display = runs.length ? "" : "none";  // no run with LayerScale: no empty chart's room
    if (!runs.length) return;
    var all = [].concat.apply([], runs.map(function (k) { return lambdas[k]; })).filter(function (v) { return v > 0; });
    if (!all.length) { svg.style.display = "none"; return; }  // λ₀ = 0 (ReZero's start): nothing to draw on a log axis yet
    var lam0 = runs.map(function (k) { return starts[k]; }).filter(function (v) { return v > 0; });
    all = all.concat(lam0);
    // the axis ends on powers of ten; each power is labelled, and 2 and 5 times it too where it spans at most two
    var lo = Math.floor(Math.log10(Math.min.apply(null, all))), hi = Math.ceil(Math.log10(Math.max.apply(null, all)));
    if (hi === lo) hi += 1;
    var ticks = [];
    for (var e = lo; e <= hi; e++) {
      (hi - lo <= 2 && e < hi ? [1, 2, 5] : [1]).forEach(function (m) { ticks.push(m * Math.pow(10, e)); });
    }
    if (ticks.length > 8) ticks = ticks.filter(function (v, i) { return (hi - Math.round(Math.log10(v))) % 2 === 0; });
    var depth = Math.max.apply(null, runs.map(function (k) { return lambdas[k].length; }));
    function add(tag, attrs, text) {
      var e = document.createElementNS(ns, tag);
      Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
    }
    var x = function (i) { return L + (W - L - R) * (depth > 1 ? i / (depth - 1) : 0.5); };
    var y = function (v) { return T + (H - T - B) * (1 - (Math.log10(v) - lo) / (hi - lo)); };
    add("text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 12, fill: "currentColor",
                 transform: "rotate(-90 14 " + (T + H - B) / 2 + ")"}, "mean |λ|");
    add("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, fill: "currentColor"}, "block");
    [1, depth].forEach(function (b) {
      add("text", {x: x(b - 1), y: H - B + 16, "text-anchor": "middle", "font-size": 12, fill: "currentColor"}, String(b));
    });
    ticks.forEach(function (v) {
      add("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 12, fill: "currentColor"}, logLabel(v));
    });
    runs.forEach(function (k) {
      if (!(starts[k] > 0)) return;
      add("line", {x1: L, y1: y(starts[k]), x2: W - R, y2: y(starts[k]), stroke: COLORS[k], "stroke-dasharray": "2 3",
                   class: "andrea-train-lambda0"});
      add("text", {x: W - R - 2, y: y(starts[k]) - 4, "text-anchor": "end", "font-size": 12, fill: COLORS[k]},
          "λ₀ of " + k);
    });
    runs.forEach(function (k) {
      var d = lambdas[k].map(function (v, i) { return (i ? "L" : "M") + x(i).toFixed(1) + "," + y(Math.max(v, 1e-12)).toFixed(1); }).join("");
      add("path", {d: d, fill: "none", stroke: COLORS[k], "stroke-width": 2, "stroke-dasharray": k === "B" ? "6 3" : ""});
    });
  }

  function mount(root, opts) {
    var worker = null, id = 0, state = "idle", series = {}, lambdas = {}, unigram = null, started = 0;
    var trained = {};  // the settings each run last trained with (its torch reference is shown only at the defaults)
    var forms = {}, box = el("div", {class: "andrea-train-runs"});
    ["A", "B"].forEach(function (name) {
      var fs = el("fieldset", {class: "andrea-train-run", "data-run": name});
      fs.appendChild(el("legend", {style: "color:" + COLORS[name]}, "Run " + name + (name === "B" ? " (dashed)" : "")));
      forms[name] = {};
      FIELDS.forEach(function (f) {
        var lab = el("label", {}, f[1] + " "), input;
        if (f[2] === "choice") {
          input = el("select", {name: f[0]});
          f[3].forEach(function (o) { var op = el("option", {value: String(o)}, String(o)); input.appendChild(op); });
        } else input = el("input", {name: f[0], type: "text", inputmode: "decimal", size: "7"});
        var v = opts.runs[name][f[0]];
        input.value = v === null || v === undefined ? "" : String(v);
        lab.appendChild(input);
        fs.appendChild(lab);
        forms[name][f[0]] = input;
      });
      box.appendChild(fs);
    });
    var buttons = el("div", {class: "andrea-train-buttons"});
    var train = el("button", {type: "button", class: "andrea-train-go"}, "Train A and B");
    var stop = el("button", {type: "button", class: "andrea-train-stop", disabled: ""}, "Stop");
    var reset = el("button", {type: "button", class: "andrea-train-reset"}, "Reset");
    var fix = el("label", {}, " fix the y-axis ");
    var fixBox = el("input", {type: "checkbox", class: "andrea-train-fix"});
    fix.appendChild(fixBox);
    [train, stop, reset, fix].forEach(function (b) { buttons.appendChild(b); });
    var status = el("p", {class: "andrea-train-status", role: "status", "aria-live": "polite"},
                    "Press “Train A and B”: both runs train here, in your browser.");
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "andrea-train-chart");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "training loss of runs A and B against the step");
    var lamSvg = document.createElementNS(ns, "svg");
    lamSvg.setAttribute("class", "andrea-train-lambda");
    lamSvg.setAttribute("role", "img");
    lamSvg.setAttribute("aria-label", "mean |λ| of each block, for the runs with LayerScale");
    var legend = el("p", {class: "andrea-train-legend"},
                    "Solid: run A · dashed: run B · dotted grey: the unigram level (the plateau), the loss of a " +
                    "model that ignores the context");
    var refNote = el("p", {class: "andrea-train-refnote"});
    var lamNote = el("p", {class: "andrea-train-lambdanote"},
                     "Below: the mean |λ| of each block (block 1 at the left) at the latest step, redrawn as the " +
                     "runs train; dotted: λ₀, where every block's λ starts. The gap is how much each block's λ has grown.");
    lamNote.hidden = true;
    [box, buttons, status, svg, legend, refNote, lamNote, lamSvg].forEach(function (e) { root.appendChild(e); });
    var fixedY = null;

    /* Whether run k's settings (as it trained, or as its form reads before any training) are the defaults
     * that torch's reference curve was trained with. */
    function atDefaults(k) {
      var s = trained[k];
      if (!s) {
        try { s = readRun(k, forms[k], opts.limits); } catch (err) { return false; }
      }
      return FIELDS.every(function (f) {
        var d = opts.runs[k][f[0]];
        return (d === null || d === undefined) ? s[f[0]] === null : String(s[f[0]]) === String(d);
      });
    }
    // While training, the chart is redrawn at most every DRAW_MS (a step arrives every ~50-100 ms): the
    // main thread's drawing then leaves a loaded machine's CPU to the worker that trains.
    var DRAW_MS = 250, drawTimer = null;
    function redrawSoon() {
      if (drawTimer === null) drawTimer = setTimeout(function () { drawTimer = null; redraw(); }, DRAW_MS);
    }
    function redraw() {
      if (drawTimer !== null) { clearTimeout(drawTimer); drawTimer = null; }
      var refs = (opts.references || []).filter(function (r) { return atDefaults(r.run); });
      var hidden = (opts.references || []).filter(function (r) { return refs.indexOf(r) < 0; })
        .map(function (r) { return r.run; });
      refNote.textContent = !(opts.references || []).length ? "" : hidden.length
        ? "Torch's reference curve for run " + hidden.join(" and ") + " is hidden: it was trained at the default " +
          "settings, and " + (hidden.length > 1 ? "these runs' settings differ" : "this run's settings differ") +
          " (Reset brings the defaults back)."
        : "Thin lines: torch's mean curves for these very settings (the defaults), the reference the page is tested against.";
      drawLoss(svg, series, unigram, refs, fixBox.checked ? fixedY : null);
      var starts = {};
      Object.keys(lambdas).forEach(function (k) { starts[k] = trained[k] ? trained[k].layerscale : null; });
      drawLambda(lamSvg, lambdas, starts);
      lamNote.hidden = lamSvg.style.display === "none";
    }
    Object.keys(forms).forEach(function (k) {
      Object.keys(forms[k]).forEach(function (f) {
        ["input", "change"].forEach(function (ev) {
          forms[k][f].addEventListener(ev, function () { if (state === "idle") redraw(); });
        });
      });
    });
    window.addEventListener("resize", redraw);
    fixBox.addEventListener("change", function () {
      fixedY = fixBox.checked ? [Math.min(2, (unigram || 3) - 1.5), Math.max(5.6, (unigram || 3) + 1)] : null;
      redraw();
    });
    redraw();

    function getWorker() {
      if (worker) return worker;
      if (window.location.protocol === "file:") throw new Error("training needs the site served over http (make serve), not opened as a file");
      worker = new Worker(staticUrl("andrea_train_worker.js"));
      worker.onmessage = function (e) {
        var m = e.data;
        if (m.id !== id) return;  // an older request's last messages
        if (m.type === "ready") {
          unigram = m.unigram;
          status.textContent = "Training A and B in your browser (" + m.backend + ")…";
        } else if (m.type === "step") {
          series[m.name].points.push([m.step, m.loss]);
          if (m.lambda) lambdas[m.name] = m.lambda;
          series[m.name].lr = m.lr;
          var parts = Object.keys(series).map(function (k) {
            var p = series[k].points, last = p[p.length - 1];
            return k + ": step " + (last ? last[0] : 0) + (last ? ", loss " + last[1].toFixed(3) : "");
          });
          var done = 0, total = 0;
          Object.keys(series).forEach(function (k) { done += series[k].points.length; total += series[k].steps; });
          var secs = (performance.now() - started) / 1000, left = done ? secs * (total - done) / done : 0;
          if (state === "training")  // (a step that was running when Stop came is drawn, the status kept)
            status.textContent = parts.join(" · ") + (done < total ? " · about " +
              (left >= 90 ? Math.round(left / 60) + " min" : Math.round(left) + " s") + " left" : "");
          redrawSoon();
        } else if (m.type === "diverged") {
          series[m.name].diverged = m.step;
          redraw();
          status.textContent = "Run " + m.name + " diverged at step " + m.step + " (a non-finite loss or gradient): it stops there, as andrea.train does.";
        } else if (m.type === "done") {
          series[m.name].done = true;
          redraw();
          if (Object.keys(series).every(function (k) { return series[k].done || series[k].diverged; })) {
            state = "done";
            stop.disabled = true;
            status.textContent += " · done";
          }
        } else if (m.type === "error") {
          state = "idle";
          stop.disabled = true;
          status.textContent = m.error;
          root.setAttribute("data-error", m.error);
        }
      };
      worker.onerror = function (e) {
        status.textContent = "the page's trainer did not start (" + (e.message || "a Web Worker error") + ")";
        e.preventDefault();
      };
      return worker;
    }

    train.addEventListener("click", function () {
      root.removeAttribute("data-error");
      var runs, errors = [];
      try {
        runs = ["A", "B"].map(function (name) {
          try {
            var s = readRun(name, forms[name], opts.limits);
          } catch (err) {
            errors.push(err.message);
            return null;
          }
          trained[name] = s;
          s.name = name;
          return message(s, opts.fixed);
        });
        if (errors.length) {
          trained = {};
          throw new Error(errors.join(" · "));
        }
        var w = getWorker();
        id += 1;
        series = {A: {points: [], steps: runs[0].train.steps}, B: {points: [], steps: runs[1].train.steps}};
        started = performance.now();
        lambdas = {};
        state = "training";
        stop.disabled = false;
        stop.textContent = "Stop";
        w.postMessage({type: "train", id: id, corpus: staticUrl("andrea/" + opts.corpus), runs: runs});
        status.textContent = "Starting TensorFlow.js…";
        redraw();
      } catch (err) {
        status.textContent = err.message;
        root.setAttribute("data-error", err.message);
      }
    });
    stop.addEventListener("click", function () {
      if (!worker) return;
      if (state === "training") {
        worker.postMessage({type: "stop", id: id});
        state = "stopped";
        stop.textContent = "Resume";
        status.textContent = status.textContent.replace(/ · about .* left$/, "") + " · stopped";
      } else if (state === "stopped") {
        worker.postMessage({type: "resume", id: id});
        state = "training";
        stop.textContent = "Stop";
      }
    });
    reset.addEventListener("click", function () {
      if (worker) worker.postMessage({type: "reset", id: id});
      id += 1;
      state = "idle";
      series = {};
      lambdas = {};
      stop.disabled = true;
      stop.textContent = "Stop";
      ["A", "B"].forEach(function (name) {
        FIELDS.forEach(function (f) {
          var v = opts.runs[name][f[0]];
          forms[name][f[0]].value = v === null || v === undefined ? "" : String(v);
        });
      });
      trained = {};
      status.textContent = "Reset: the defaults are back.";
      redraw();
    });
  }

  window.AndreaTrainPanel = {mount: mount, readRun: readRun};
})();
