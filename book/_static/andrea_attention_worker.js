/* The attention viewer's Web Worker: andrea_attention.js's model, off the page's main thread.
 *
 * Loads, once, from _static/andrea/ (written into the built site by book/_ext/andrea_site.py):
 * config.json (the trained model's shape), tokenizer.json (the book's BPE) and trained.safetensors
 * (the shipped weights, float16); the untrained weights are drawn from a seed on first use.
 * In: {id, text, model: "trained" | "untrained"}.
 * Out: {id, tokens: [{id, text}], T, n_layer, n_head, maps (Float32Array, every block's and head's
 * T x T weights, transferred), model, ms (the forward pass), loadMs (the files' fetch and parse)},
 * or {id, error}, or {id, superseded: true} when a newer request came in first: the newest wins.
 */
importScripts("andrea_flow.js", "andrea_attention.js");

var A = self.AndreaAttention, t0 = performance.now();

function load(name, kind) {
  var url = new URL("andrea/" + name, self.location.href).href;
  return fetch(url).then(function (r) {
    if (!r.ok) throw new Error("could not load the viewer's file _static/andrea/" + name + " (HTTP " + r.status + ")");
    return kind === "json" ? r.json() : kind === "text" ? r.text() : r.arrayBuffer();
  });
}

var base = Promise.all([load("config.json", "json"), load("tokenizer.json", "text")]).then(function (got) {
  var config = got[0];
  A.checkConfig(config);
  return {config: config, tokenizer: A.tokenizer(got[1]), ms: performance.now() - t0};
});
var trained = base.then(function (b) {
  return load(b.config.weights || "trained.safetensors", "bytes").then(function (buf) {
    var w = A.weightsOf(A.readSafetensors(buf));
    return {weights: w, ms: performance.now() - t0};
  });
});
base.catch(function () {});  // a failed load is said in each answer, not as an unhandled rejection
trained.catch(function () {});
var untrained = null;  // drawn on first use (seed 0): 7 million normal draws, a few hundred ms

function weightsFor(model) {
  if (model === "trained") return trained;
  if (model === "untrained") {
    if (!untrained) untrained = base.then(function (b) {
      var t = performance.now();
      return {weights: A.untrainedWeights(b.config, b.config.untrained_seed || 0), ms: performance.now() - t};
    });
    return untrained;
  }
  return Promise.reject(new Error("model must be \"trained\" or \"untrained\", got " + JSON.stringify(model)));
}

function answer(req) {
  return base.then(function (b) {
    var tokens = A.prepare(b.tokenizer, req.text, b.config.max_tokens || A.MAX_TOKENS);  // checks first: no wait for weights
    return weightsFor(req.model).then(function (w) {
      if (latest) return {id: req.id, superseded: true};  // a newer request came in while the files loaded
      var t = performance.now();
      var r = A.attend(b.config, w.weights, tokens.map(function (x) { return x.id; }));
      return {id: req.id, tokens: tokens, T: r.T, n_layer: r.n_layer, n_head: r.n_head, maps: r.maps,
              model: req.model, ms: performance.now() - t, loadMs: w.ms};
    });
  }).catch(function (err) {
    return {id: req.id, error: String((err && err.message) || err)};
  });
}

var latest = null, busy = false;
self.onmessage = function (e) {
  if (latest) self.postMessage({id: latest.id, superseded: true});
  latest = e.data;
  if (!busy) pump();
};

function pump() {
  busy = true;
  // one turn of the event loop first, so that requests already queued replace this one: the newest wins
  setTimeout(function () {
    var req = latest;
    latest = null;
    if (!req) { busy = false; return; }
    answer(req).then(function (reply) {
      if (reply.maps) self.postMessage(reply, [reply.maps.buffer]);
      else self.postMessage(reply);
      if (latest) pump(); else busy = false;
    });
  }, 0);
}
