/* Training ANDREA in the page, on TensorFlow.js: the same step as andrea.training.train.
 *
 * One optimizer step: the learning rate of the step (a linear warmup, then a cosine decay to
 * lr * minLrRatio: andrea.training.train.lr_at), the mean next-token cross-entropy of a batch, its
 * gradient with respect to every weight (AndreaFlow.passes: the backward pass written out by hand,
 * checked against torch's steps in tests/test_page_training.py), the gradient clipped to a global norm (torch.nn.utils.clip_grad_norm_), and
 * AdamW as torch computes it (andrea.training.optimizer: decoupled weight decay on the matrices only,
 * the 2-D weights, never on biases, LayerNorm gains or LayerScale's lambda; bias-corrected moments;
 * eps 1e-8).
 *
 * Weights are named and shaped as the torch model's state_dict (AndreaFlow.shapes), so weights
 * exported by andrea.web.export.training_case load as they are, and the page's run can be compared
 * with torch's step by step. Runs wherever `tf` and `AndreaFlow` are globals: a page, a Web Worker.
 */
(function (root) {
  "use strict";
  var EPS = 1e-8, CLIP_EPS = 1e-6;  // torch.optim.AdamW's eps; clip_grad_norm_'s

  function fail(msg) { throw new Error("andrea_train: " + msg); }
  function shown(v) { return root.AndreaFlow.shown(v); }  // loaded after andrea_flow.js
  function isInt(v) { return typeof v === "number" && Number.isInteger(v); }
  function isReal(v) { return typeof v === "number" && isFinite(v); }

  /* A model to train, checked: vocab, context, width, heads, depth, norm, residual, layerscale. */
  function checkModel(m) {
    if (m === null || typeof m !== "object" || Array.isArray(m))
      fail("a model must be an object such as {vocab: 256, context: 64, width: 64, heads: 4, depth: 6}, got " + shown(m));
    var out = {
      vocab: m.vocab === undefined ? 256 : m.vocab,
      context: m.context === undefined ? 64 : m.context,
      width: m.width === undefined ? 64 : m.width,
      heads: m.heads === undefined ? 4 : m.heads,
      depth: m.depth === undefined ? 6 : m.depth,
      norm: m.norm === undefined ? "pre" : m.norm,
      residual: m.residual === undefined ? true : m.residual,
      layerscale: m.layerscale === undefined ? null : m.layerscale,
      seed: m.seed === undefined ? 0 : m.seed,
      init: m.init === undefined ? "gpt2" : m.init,
    };
    if (!isInt(out.vocab) || out.vocab < 2 || out.vocab > 8449) fail("vocab must be an integer from 2 to 8449, got " + shown(m.vocab));
    if (!isInt(out.context) || out.context < 1 || out.context > 256) fail("context must be an integer from 1 to 256, got " + shown(m.context));
    if (!isInt(out.width) || out.width < 8 || out.width > 256) fail("width must be an integer from 8 to 256, got " + shown(m.width));
    if (!isInt(out.heads) || out.heads < 1 || out.width % out.heads)
      fail("heads must be a positive integer that divides the width (" + out.width + "), got " + shown(m.heads));
    if (!isInt(out.depth) || out.depth < 1 || out.depth > 96) fail("depth must be an integer from 1 to 96, got " + shown(m.depth));
    if (["pre", "post", "none"].indexOf(out.norm) < 0) fail("norm must be one of pre, post, none, got " + shown(m.norm));
    if (out.residual !== true && out.residual !== false) fail("residual must be true or false, got " + shown(m.residual));
    if (out.layerscale !== null && !(isReal(out.layerscale) && out.layerscale >= 0 && out.layerscale <= 1))
      fail("layerscale must be null (off) or a number from 0 (ReZero's start) to 1, got " + shown(m.layerscale));
    if (out.init !== "gpt2" && out.init !== "xavier") fail("init must be gpt2 or xavier, got " + shown(m.init));
    if (!isInt(out.seed) || out.seed < 0 || out.seed > 10000) fail("seed must be an integer from 0 to 10000, got " + shown(m.seed));
    return out;
  }

  /* Training settings, checked: the names and defaults of andrea.training.train.TrainConfig. */
  function checkTrain(t) {
    if (t === null || typeof t !== "object" || Array.isArray(t))
      fail("training settings must be an object such as {steps: 200, lr: 0.003}, got " + shown(t));
    var d = {steps: 300, batchSize: 16, seqLen: 64, lr: 3e-3, warmup: 30, minLrRatio: 0.1, weightDecay: 0.1,
             beta1: 0.9, beta2: 0.95, gradClip: 1.0};
    var out = {};
    Object.keys(t).forEach(function (k) {
      if (!(k in d)) fail("unknown training setting " + shown(k) + "; allowed: " + Object.keys(d).join(", "));
    });
    Object.keys(d).forEach(function (k) { out[k] = t[k] === undefined ? d[k] : t[k]; });
    ["steps", "batchSize", "seqLen"].forEach(function (k) {
      if (!isInt(out[k]) || out[k] < 1) fail(k + " must be a positive integer, got " + shown(t[k]));
    });
    // a page's memory and patience: a batch past 256 sequences runs WebAssembly out of memory, and a run past
    // 100,000 steps would take days in a browser
    if (out.batchSize > 256) fail("batchSize must be an integer from 1 to 256 (a page's memory), got " + shown(t.batchSize));
    if (out.steps > 100000) fail("steps must be an integer from 1 to 100000, got " + shown(t.steps));
    if (!isInt(out.warmup) || out.warmup < 0) fail("warmup must be an integer >= 0, got " + shown(t.warmup));
    if (out.warmup > out.steps) fail("warmup (" + out.warmup + ") must not exceed the steps (" + out.steps + ")");
    if (!isReal(out.lr) || out.lr <= 0) fail("lr must be a finite number > 0, got " + shown(t.lr));
    if (!isReal(out.minLrRatio) || out.minLrRatio < 0 || out.minLrRatio > 1)
      fail("minLrRatio must be a number in [0, 1], got " + shown(t.minLrRatio));
    ["beta1", "beta2"].forEach(function (k) {
      if (!isReal(out[k]) || out[k] < 0 || out[k] >= 1) fail(k + " must be a number in [0, 1), got " + shown(t[k]));
    });
    if (!isReal(out.weightDecay) || out.weightDecay < 0) fail("weightDecay must be a number >= 0, got " + shown(t.weightDecay));
    if (out.gradClip !== null && !(isReal(out.gradClip) && out.gradClip > 0))
      fail("gradClip must be null (none) or a number > 0, got " + shown(t.gradClip));
    return out;
  }

  /* The learning rate of optimizer step `step` (0-based), as andrea.training.train.lr_at. */
  function lrAt(step, t) {
    if (t.warmup && step < t.warmup) return t.lr * (step + 1) / t.warmup;
    var progress = Math.min(1, (step - t.warmup) / Math.max(1, t.steps - t.warmup));
    return t.lr * (t.minLrRatio + (1 - t.minLrRatio) * 0.5 * (1 + Math.cos(Math.PI * progress)));
  }

  /* A training run: model m, its weights ({state_dict name: Float32Array}; AndreaFlow.initWeights
   * draws GPT-2's initialisation from m.seed), training settings t. opts.decayAll puts weight decay on
   * every parameter (the tests' negative control). step(batch) trains on one batch ({idx, targets}:
   * batchSize x seqLen token ids each) and returns {step, loss, lr, gradNorm, finite}; a non-finite
   * loss or gradient leaves the weights as they were and marks the run diverged, as andrea.train does.
   * Call dispose() when done. */
  function Trainer(model, weights, train, opts) {
    var tf = root.tf, Flow = root.AndreaFlow;
    if (!tf) fail("TensorFlow.js (the global tf) is not loaded");
    if (!Flow) fail("andrea_flow.js (the global AndreaFlow) is not loaded");
    var m = checkModel(model), t = checkTrain(train);
    if (t.seqLen > m.context) fail("seqLen " + t.seqLen + " exceeds the model's context " + m.context);
    var decayAll = !!(opts && opts.decayAll);
    var spec = Flow.shapes(m), names = spec.map(function (e) { return e[0]; });
    weights = weights || Flow.initWeights(m);
    var P = {}, M = {}, V = {};
    spec.forEach(function (e) {
      var a = weights[e[0]], n = e[1].reduce(function (x, y) { return x * y; }, 1);
      if (!a || a.length !== n) fail("weight " + e[0] + " must have " + n + " values, got " + (a ? a.length : "none"));
      P[e[0]] = tf.keep(tf.tensor(a, e[1], "float32"));
      M[e[0]] = tf.keep(tf.zerosLike(P[e[0]]));
      V[e[0]] = tf.keep(tf.zerosLike(P[e[0]]));
    });
    var decays = {};
    spec.forEach(function (e) { decays[e[0]] = decayAll || e[1].length >= 2; });
    var self = {model: m, train: t, done: 0, diverged: false, divergedAt: null};

    function checkBatch(batch) {
      var n = t.batchSize * t.seqLen;
      [batch.idx, batch.targets].forEach(function (ids) {
        if (!ids || ids.length !== n) fail("a batch has " + n + " token ids (batchSize x seqLen), got " + (ids ? ids.length : "none"));
        for (var i = 0; i < n; i++)
          if (!(isInt(ids[i]) && ids[i] >= 0 && ids[i] < m.vocab))
            fail("token id " + shown(ids[i]) + " is outside the vocabulary [0, " + m.vocab + ")");
      });
    }

    self.step = function (batch) {
      if (self.diverged) fail("the run diverged at step " + self.divergedAt + "; reset it to train again");
      if (self.done >= t.steps) fail("the run has done its " + t.steps + " steps");
      checkBatch(batch);
      var lr = lrAt(self.done, t), B = t.batchSize, T = t.seqLen;
      var out = tf.tidy(function () {
        var idx = tf.tensor1d(Int32Array.from(batch.idx), "int32");
        var oneHot = tf.oneHot(tf.tensor1d(Int32Array.from(batch.targets), "int32"), m.vocab);
        // the forward and backward passes written out by hand (AndreaFlow.passes), with every weight's gradient
        var r = Flow.passes(m, P, {}, m.norm, idx, oneHot, {batch: B, seq: T, weightGrads: true});
        var grads = names.map(function (k) {
          if (!r.weightGrads[k]) fail("no gradient for " + k);
          return r.weightGrads[k];
        });
        var loss = r.loss.dataSync()[0];
        var sq = tf.addN(grads.map(function (g) { return tf.sum(tf.square(g)); }));
        var norm = Math.sqrt(sq.dataSync()[0]);
        if (!(isFinite(loss) && isFinite(norm))) return {loss: loss, norm: norm, finite: false};
        var coef = t.gradClip === null ? 1 : Math.min(1, t.gradClip / (norm + CLIP_EPS));
        var k = self.done + 1, bc1 = 1 - Math.pow(t.beta1, k), bc2 = Math.sqrt(1 - Math.pow(t.beta2, k));
        names.forEach(function (name, i) {
          var g = coef === 1 ? grads[i] : tf.mul(grads[i], coef);
          var m1 = tf.add(tf.mul(M[name], t.beta1), tf.mul(g, 1 - t.beta1));
          var v1 = tf.add(tf.mul(V[name], t.beta2), tf.mul(tf.square(g), 1 - t.beta2));
          var p = decays[name] ? tf.mul(P[name], 1 - lr * t.weightDecay) : P[name];
          var denom = tf.add(tf.div(tf.sqrt(v1), bc2), EPS);
          var p1 = tf.sub(p, tf.mul(tf.div(m1, denom), lr / bc1));
          [P, M, V].forEach(function (store, j) {
            store[name].dispose();
            store[name] = tf.keep([p1, m1, v1][j]);
          });
        });
        return {loss: loss, norm: norm, finite: true};
      });
      if (!out.finite) {
        self.diverged = true;
        self.divergedAt = self.done + 1;
      } else self.done += 1;
      return {step: self.done, loss: out.loss, lr: lr, gradNorm: out.norm, finite: out.finite};
    };

    /* The current weights, or AdamW's first (exp_avg) or second (exp_avg_sq) moments, by name. */
    self.read = function (what) {
      var store = {weights: P, exp_avg: M, exp_avg_sq: V}[what];
      if (!store) fail("read takes weights, exp_avg or exp_avg_sq, got " + shown(what));
      var out = {};
      names.forEach(function (k) { out[k] = store[k].dataSync(); });
      return out;
    };
    self.dispose = function () {
      [P, M, V].forEach(function (store) { names.forEach(function (k) { store[k].dispose(); }); });
    };
    return self;
  }

  /* Seeded training batches from a byte corpus (a Uint8Array), drawn as andrea's TokenData.batch
   * draws them (another generator, so other windows): windows of seqLen + 1 bytes from the training
   * split, the first 90 % of the text. next() returns {idx, targets}. */
  function sampler(bytes, seed, batchSize, seqLen) {
    if (!(bytes instanceof Uint8Array)) fail("the corpus must be a Uint8Array of bytes");
    var n = Math.floor(bytes.length * 0.9);
    if (n < seqLen + 2) fail("the corpus's training split (" + n + " bytes) is shorter than one window of " + (seqLen + 1));
    var next = root.AndreaFlow.rng(1000 * seed + 1);
    return function () {
      var idx = new Int32Array(batchSize * seqLen), targets = new Int32Array(batchSize * seqLen);
      for (var b = 0; b < batchSize; b++) {
        var start = Math.floor(next() * (n - seqLen - 1));
        for (var t = 0; t < seqLen; t++) {
          idx[b * seqLen + t] = bytes[start + t];
          targets[b * seqLen + t] = bytes[start + t + 1];
        }
      }
      return {idx: idx, targets: targets};
    };
  }

  /* The entropy of the corpus's byte frequencies (nats): the loss of a model that ignores its
   * context, the plateau the chapters measure against. */
  function unigramEntropy(bytes) {
    var counts = new Float64Array(256), h = 0;
    for (var i = 0; i < bytes.length; i++) counts[bytes[i]] += 1;
    for (var k = 0; k < 256; k++) if (counts[k]) { var q = counts[k] / bytes.length; h -= q * Math.log(q); }
    return h;
  }

  root.AndreaTrain = {checkModel: checkModel, checkTrain: checkTrain, lrAt: lrAt, Trainer: Trainer,
                      sampler: sampler, unigramEntropy: unigramEntropy};
})(typeof self !== "undefined" ? self : this);
