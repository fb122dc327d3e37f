/* ANDREA's gradient-flow probe in the browser, on TensorFlow.js.
 *
 * The same model as andrea/model/transformer.py and andrea/model/layers.py, at the explorer's settings (GELU-tanh
 * MLP, causal multi-head attention with 32-dimensional heads, learned position embeddings, a tied
 * output head, biases, LayerNorm eps 1e-5), and the same measurement as andrea.measure.probe.gradient_flow:
 * one forward and backward pass on a fixed batch, the RMS of the residual stream and of the loss's
 * gradient with respect to it at every block boundary (0 = the embeddings' output, i = block i's
 * output). That gradient is written out by hand (passes: each layer's backward pass, as plain
 * products, with no autodiff tape: a third of the kernels autodiff would run), and checked against
 * torch's at every boundary (tests/test_page_model.py); with every weight's gradient, the same passes
 * train the model in the page (andrea_train.js, checked against torch's steps).
 *
 * Weights are named and shaped as the torch model's state_dict (Linear weights are (out, in)), so
 * weights exported by andrea.live load as they are. Without them, initWeights draws GPT-2's
 * initialisation from a seed: N(0, 0.02^2) everywhere, the two residual output projections of
 * every block N(0, 0.02^2 / (2 * depth)), biases 0, LayerNorm gains 1, LayerScale lambda_0.
 *
 * Runs wherever `tf` is a global: the page, a Web Worker (andrea_worker.js), Node.
 */
(function (root) {
  "use strict";
  var VOCAB = 8449, SEQ = 32, BATCH = 2, HEAD_DIM = 32, INIT_STD = 0.02, LN_EPS = 1e-5;
  var NORMS = ["pre", "post", "none"];
  var GELU_C = Math.sqrt(2 / Math.PI), GELU_A = 0.044715;

  function fail(msg) { throw new Error("andrea_flow: " + msg); }

  /* A setting, checked: the same ranges as andrea.views.explorer.Setting (widths 32-128 here). */
  /* a value as the reader typed it: JSON.stringify would print NaN and Infinity as null */
  function shown(v) {
    return typeof v === "number" && !isFinite(v) ? String(v) : v === undefined ? "undefined" : JSON.stringify(v);
  }

  function checkSetting(s) {
    if (s === null || typeof s !== "object" || Array.isArray(s))
      fail("a setting must be an object such as {depth: 12, norm: \"pre\"}, got " + shown(s));
    var out = {
      width: s.width === undefined ? 128 : s.width,
      depth: s.depth === undefined ? 12 : s.depth,
      norm: s.norm === undefined ? "pre" : s.norm,
      residual: s.residual === undefined ? true : s.residual,
      layerscale: s.layerscale === undefined ? null : s.layerscale,
      seed: s.seed === undefined ? 0 : s.seed,
    };
    if (!Number.isInteger(out.width) || out.width < 32 || out.width > 128 || out.width % HEAD_DIM)
      fail("width must be 32, 64, 96 or 128, got " + shown(s.width));
    if (!Number.isInteger(out.depth) || out.depth < 1 || out.depth > 96)
      fail("depth must be an integer from 1 to 96, got " + shown(s.depth));
    if (NORMS.indexOf(out.norm) < 0) fail("norm must be one of pre, post, none, got " + shown(s.norm));
    if (out.residual !== true && out.residual !== false)
      fail("residual must be true or false, got " + shown(s.residual));
    if (out.layerscale !== null &&
        (typeof out.layerscale !== "number" || !(out.layerscale >= 0 && out.layerscale <= 1)))
      fail("layerscale must be null (off) or a number from 0 (ReZero's start) to 1, got " + shown(s.layerscale));
    if (!Number.isInteger(out.seed) || out.seed < 0 || out.seed > 10000)
      fail("seed must be an integer from 0 to 10000, got " + shown(s.seed));
    return out;
  }

  /* mulberry32: a small seeded generator, so a seed gives the same batch and weights everywhere.
   * next() is the next uniform in [0, 1); next.state holds the generator's state, which normals steps
   * in its own loop (the same sequence, twice as fast as calling next). */
  function rng(seed) {
    var g = {a: (seed >>> 0) ^ 0x9e3779b9};
    function next() {
      var t = g.a = (g.a + 0x6d2b79f5) >>> 0;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    }
    next.state = g;
    return next;
  }

  /* n normal draws of standard deviation std from rng's next: Marsaglia's polar method, two values per
   * accepted pair of uniforms (a quarter faster than Box-Muller's logarithm, square root, sine and
   * cosine). Drawn at standard deviation 1 and then scaled (scaled), so that a draw kept unscaled (the
   * explorer's held model) gives the very same weights at any std. */
  function normals(n, std, next) {
    var out = new Float32Array(n), a = next.state.a, t, u, v, q, f;
    for (var i = 0; i < n;) {
      // two steps of next(), written out
      t = a = (a + 0x6d2b79f5) >>> 0;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      u = 2 * (((t ^ (t >>> 14)) >>> 0) / 4294967296) - 1;
      t = a = (a + 0x6d2b79f5) >>> 0;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      v = 2 * (((t ^ (t >>> 14)) >>> 0) / 4294967296) - 1;
      q = u * u + v * v;
      if (q >= 1 || q === 0) continue;
      f = Math.sqrt(-2 * Math.log(q) / q);
      out[i++] = u * f;
      if (i < n) out[i++] = v * f;
    }
    next.state.a = a;
    return std === 1 ? out : scaled(out, std, out);
  }
  function scaled(a, k, out) {  // in float32, as a float32 product on TensorFlow.js gives it
    var kf = Math.fround(k);
    out = out || new Float32Array(a.length);
    for (var i = 0; i < a.length; i++) out[i] = a[i] * kf;
    return out;
  }
  // GPT-2's standard deviation for a normal-initialised matrix: the residual projections' shrunk with depth
  function gpt2Std(name, depth) { return /proj\.weight$/.test(name) ? INIT_STD / Math.sqrt(2 * depth) : INIT_STD; }

  /* Names and shapes of the state_dict, in the torch model's order. */
  function shapes(s) {
    var C = s.width, V = s.vocab || VOCAB, L = s.context || SEQ;
    var out = [["token_embedding.weight", [V, C]], ["position_embedding.weight", [L, C]]];
    for (var i = 0; i < s.depth; i++) {
      var p = "blocks." + i + ".";
      if (s.norm !== "none") out.push([p + "ln_1.weight", [C]], [p + "ln_1.bias", [C]]);
      out.push([p + "attn.qkv.weight", [3 * C, C]], [p + "attn.qkv.bias", [3 * C]],
               [p + "attn.proj.weight", [C, C]], [p + "attn.proj.bias", [C]]);
      if (s.norm !== "none") out.push([p + "ln_2.weight", [C]], [p + "ln_2.bias", [C]]);
      out.push([p + "mlp.fc.weight", [4 * C, C]], [p + "mlp.fc.bias", [4 * C]],
               [p + "mlp.proj.weight", [C, 4 * C]], [p + "mlp.proj.bias", [C]]);
      if (s.layerscale !== null) out.push([p + "ls_1.scale", [C]], [p + "ls_2.scale", [C]]);
    }
    if (s.norm === "pre") out.push(["final_norm.weight", [C]], ["final_norm.bias", [C]]);
    return out;
  }

  /* Xavier's uniform initialisation of a Linear weight (out, in), as andrea's init="xavier": each matrix
   * a fused projection stands for (q, k and v in attn.qkv) with its own fans, U(-b, b) with
   * b = sqrt(6 / (fan_in + fan_out)). */
  function xavier(shape, name, next) {
    var parts = /attn\.qkv\.weight$/.test(name) ? 3 : 1, out = new Float32Array(shape[0] * shape[1]);
    var b = Math.sqrt(6 / (shape[0] / parts + shape[1]));
    for (var i = 0; i < out.length; i++) out[i] = (2 * next() - 1) * b;
    return out;
  }

  /* GPT-2's initialisation (or Xavier's, with setting.init = "xavier"), drawn from `seed` (float32 arrays, keyed by state_dict name). */
  function initWeights(setting) {
    var s = checkSetting(setting), next = rng(1000003 * s.seed + 17), w = {};
    var init = setting.init === undefined ? "gpt2" : setting.init;
    if (init !== "gpt2" && init !== "xavier") fail("init must be gpt2 or xavier, got " + shown(setting.init));
    // a model to train names its vocabulary and context (andrea_train.js); the explorer's are fixed
    var sized = {width: s.width, depth: s.depth, norm: s.norm, layerscale: s.layerscale,
                 vocab: setting.vocab, context: setting.context};
    shapes(sized).forEach(function (e) {
      var name = e[0], shape = e[1], n = shape.reduce(function (a, b) { return a * b; }, 1), a;
      if (/\.bias$/.test(name)) a = new Float32Array(n);
      else if (/ln_\d\.weight$|final_norm\.weight$/.test(name)) a = new Float32Array(n).fill(1);
      else if (/\.scale$/.test(name)) a = new Float32Array(n).fill(s.layerscale);
      else if (init === "xavier" && shape.length === 2 && !/embedding/.test(name)) a = xavier(shape, name, next);
      else a = normals(n, gpt2Std(name, s.depth), next);
      w[name] = a;
    });
    return w;
  }

  /* The seeded batch: BATCH x SEQ uniformly random token ids and their next-token targets. */
  function randomBatch(seed) {
    var next = rng(7919 * seed + 5), idx = new Int32Array(BATCH * SEQ), tgt = new Int32Array(BATCH * SEQ);
    for (var b = 0; b < BATCH; b++) {
      var row = [];
      for (var t = 0; t <= SEQ; t++) row.push(Math.floor(next() * VOCAB));
      for (t = 0; t < SEQ; t++) { idx[b * SEQ + t] = row[t]; tgt[b * SEQ + t] = row[t + 1]; }
    }
    return {idx: idx, targets: tgt};
  }

  /* The RMS of a float32 array, accumulated in float64 (as andrea.measure.probe._rms does). */
  function rms(a) {
    var sq = 0;
    for (var i = 0; i < a.length; i++) sq += a[i] * a[i];
    return Math.sqrt(sq / a.length);
  }

  /* The pieces of the forward pass (passes), on TensorFlow.js tensors. Each returns what its backward
   * needs as well as its output. */
  function layerNorm(tf, x, g, b) {
    var m = tf.moments(x, -1, true), rstd = tf.rsqrt(tf.add(m.variance, LN_EPS));
    var xhat = tf.mul(tf.sub(x, m.mean), rstd);
    return {y: tf.add(tf.mul(xhat, g), b), xhat: xhat, rstd: rstd};
  }
  // GELU's tanh form, as andrea's: h/2 (1 + tanh(c (h + a h^3))), computed as h sigmoid(2c (h + a h^3))
  // (the same function: 1 + tanh(u) = 2 sigmoid(2u)). On WebAssembly a sigmoid takes a fraction of a
  // tanh's time, and the form takes 6 kernels; what its derivative needs is kept.
  function gelu(tf, h) {
    var h2 = tf.mul(h, h), sg = tf.sigmoid(tf.mul(h, tf.add(tf.mul(h2, 2 * GELU_C * GELU_A), 2 * GELU_C)));
    return {y: tf.mul(h, sg), h2: h2, sg: sg};
  }
  // its derivative: s + h s (1 - s) (2c + 6 c a h^2), with s the sigmoid and h s the output
  function geluSlope(tf, g) {
    var poly = tf.add(tf.mul(g.h2, 6 * GELU_C * GELU_A), 2 * GELU_C);
    return tf.add(g.sg, tf.mul(tf.mul(g.y, tf.sub(1, g.sg)), poly));
  }
  // (N, C) rows of B sequences <-> (B*H, T, D) heads
  function splitHeads(tf, t, B, T, H, D) {
    return tf.reshape(tf.transpose(tf.reshape(t, [B, T, H, D]), [0, 2, 1, 3]), [B * H, T, D]);
  }
  function mergeHeads(tf, t, B, T, H, D) {
    return tf.reshape(tf.transpose(tf.reshape(t, [B, H, T, D]), [0, 2, 1, 3]), [B * T, H * D]);
  }
  function causalMask(tf, T) {  // 0 on and below the diagonal, -1e30 above
    return tf.mul(tf.sub(tf.linalg.bandPart(tf.ones([T, T]), -1, 0), 1), 1e30);
  }

  /* The forward pass and the backward pass, written out by hand (no autodiff tape: a third of the
   * kernels TensorFlow.js's autodiff runs, and every product a plain one, such as dY W for a linear
   * layer). Returns {acts, grads, loss, weightGrads} as tensors: the residual stream and the loss's
   * gradient with respect to it at every block boundary (the probe), and with opts.weightGrads the
   * gradient with respect to every weight, by state_dict name (training); call it inside tf.tidy.
   * W: the weights (tensors); WT: their transposes made so far (filled as needed); norm: the placement to
   * wire (the setting's, or the tests' negative control); idx, oneHot: the batch's token ids and its
   * one-hot targets; opts.batch, opts.seq: its B sequences of T tokens (the explorer's by default).
   * s.heads: the number of heads (width / 32 by default). */
  function passes(s, W, WT, norm, idx, oneHot, opts) {
    opts = opts || {};
    var tf = root.tf, B = opts.batch || BATCH, T = opts.seq || SEQ, N = B * T, C = s.width;
    var H = s.heads || C / HEAD_DIM, D = C / H;
    var mask = causalMask(tf, T), scaleQK = 1 / Math.sqrt(D);
    var dW = opts.weightGrads ? {} : null;  // the loss's gradient with respect to each weight, by name
    function acc(name, g) { dW[name] = dW[name] ? tf.add(dW[name], g) : g; }
    function wt(name) { return WT[name] || (WT[name] = tf.transpose(W[name])); }
    function linear(x, name) {  // y = x W^T + b
      return tf.add(tf.matMul(x, wt(name + ".weight")), W[name + ".bias"]);
    }
    function linearBack(dy, name, x) {  // dx = dy W; the weights': dW = dy^T x, db = the sum of dy's rows
      if (dW) {
        acc(name + ".weight", tf.matMul(tf.transpose(dy), x));
        acc(name + ".bias", tf.sum(dy, 0));
      }
      return tf.matMul(dy, W[name + ".weight"]);
    }
    function lnBack(c, name, dy) {  // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g
      if (dW) {
        acc(name + ".weight", tf.sum(tf.mul(dy, c.xhat), 0));
        acc(name + ".bias", tf.sum(dy, 0));
      }
      var dxhat = tf.mul(dy, W[name + ".weight"]);
      var a = tf.mean(dxhat, -1, true), b = tf.mean(tf.mul(dxhat, c.xhat), -1, true);
      return tf.mul(tf.sub(tf.sub(dxhat, a), tf.mul(c.xhat, b)), c.rstd);
    }
    // The attention's batched products (B*H, T, *) each with its second operand transposed: TensorFlow.js's
    // batched matMul on WebAssembly is faster so (about 105 us against 175 at these sizes)
    var ATTN = {
      forward: function (x, p) {
        var qkv = tf.split(linear(x, p + "attn.qkv"), 3, 1);
        var q = splitHeads(tf, qkv[0], B, T, H, D), k = splitHeads(tf, qkv[1], B, T, H, D);
        var v = splitHeads(tf, qkv[2], B, T, H, D);
        var P = tf.softmax(tf.add(tf.mul(tf.matMul(q, k, false, true), scaleQK), mask));
        var mixed = mergeHeads(tf, tf.matMul(P, tf.transpose(v, [0, 2, 1]), false, true), B, T, H, D);  // P v
        return {y: linear(mixed, p + "attn.proj"), x: x, mixed: mixed, q: q, k: k, v: v, P: P};
      },
      backward: function (c, dy, p) {
        var dyh = splitHeads(tf, linearBack(dy, p + "attn.proj", c.mixed), B, T, H, D);
        var dv = tf.matMul(c.P, dyh, true, false), dP = tf.matMul(dyh, c.v, false, true);
        var dS = tf.mul(tf.mul(c.P, tf.sub(dP, tf.sum(tf.mul(dP, c.P), -1, true))), scaleQK);  // softmax's
        var dq = tf.matMul(dS, tf.transpose(c.k, [0, 2, 1]), false, true), dk = tf.matMul(dS, c.q, true, false);
        var dqkv = tf.concat([dq, dk, dv].map(function (t) { return mergeHeads(tf, t, B, T, H, D); }), 1);
        return linearBack(dqkv, p + "attn.qkv", c.x);
      },
    };
    var MLP = {
      forward: function (x, p) {
        var g = gelu(tf, linear(x, p + "mlp.fc"));
        return {y: linear(g.y, p + "mlp.proj"), x: x, gelu: g};
      },
      backward: function (c, dy, p) {
        var dh = tf.mul(linearBack(dy, p + "mlp.proj", c.gelu.y), geluSlope(tf, c.gelu));
        return linearBack(dh, p + "mlp.fc", c.x);
      },
    };
    function sublayer(x, p, i, f) {  // forward; returns the output and the backward: dy -> dx
      var ln = p + "ln_" + i, lsName = p + "ls_" + i + ".scale", ls = W[lsName];
      var c, n, y;
      function scaled(d) { return ls ? tf.mul(d, ls) : d; }
      function scaledBack(dy) {  // LayerScale's: dy lambda, and for lambda the sum of dy times the branch
        if (ls && dW) acc(lsName, tf.sum(tf.mul(dy, c.y), 0));
        return scaled(dy);
      }
      if (norm === "post") {
        c = f.forward(x, p);
        n = layerNorm(tf, s.residual ? tf.add(x, scaled(c.y)) : scaled(c.y), W[ln + ".weight"], W[ln + ".bias"]);
        return {y: n.y, back: function (dy) {
          var du = lnBack(n, ln, dy), dx = f.backward(c, scaledBack(du), p);
          return s.residual ? tf.add(du, dx) : dx;
        }};
      }
      if (norm === "pre") n = layerNorm(tf, x, W[ln + ".weight"], W[ln + ".bias"]);
      c = f.forward(n ? n.y : x, p);
      y = s.residual ? tf.add(x, scaled(c.y)) : scaled(c.y);
      return {y: y, back: function (dy) {
        var dz = f.backward(c, scaledBack(dy), p), dx = n ? lnBack(n, ln, dz) : dz;
        return s.residual ? tf.add(dy, dx) : dx;
      }};
    }
    var pos = W["position_embedding.weight"], E = W["token_embedding.weight"];
    if (pos.shape[0] !== T) pos = tf.slice(pos, [0, 0], [T, C]);  // the first T positions
    var x = tf.add(tf.gather(E, idx), tf.tile(pos, [B, 1])), acts = [x], backs = [];
    for (var i = 0; i < s.depth; i++) {
      var a = sublayer(x, "blocks." + i + ".", 1, ATTN), m = sublayer(a.y, "blocks." + i + ".", 2, MLP);
      backs.push(a.back, m.back);
      x = m.y;
      acts.push(x);
    }
    var fn = norm === "pre" ? layerNorm(tf, x, W["final_norm.weight"], W["final_norm.bias"]) : null;
    var xf = fn ? fn.y : x;
    var logp = tf.logSoftmax(tf.matMul(xf, wt("token_embedding.weight")));  // the tied head: x E^T
    var loss = tf.div(tf.neg(tf.sum(tf.mul(logp, oneHot))), N);
    var dlogits = tf.div(tf.sub(tf.exp(logp), oneHot), N);  // cross-entropy's: (softmax - target) / N
    if (dW) acc("token_embedding.weight", tf.matMul(tf.transpose(dlogits), xf));  // the head's share
    var dx = tf.matMul(dlogits, E);
    if (fn) dx = lnBack(fn, "final_norm", dx);
    var grads = [dx];
    for (var j = backs.length - 1; j >= 0; j--) {
      dx = backs[j](dx);
      if (j % 2 === 0) grads.unshift(dx);  // at the boundary entering block j / 2
    }
    if (dW) {  // the embeddings': each token's row gets its positions' gradients, each position its B rows'
      var V = E.shape[0], L = W["position_embedding.weight"].shape[0];
      acc("token_embedding.weight", tf.matMul(tf.transpose(tf.cast(tf.oneHot(idx, V), "float32")), dx));
      var dpos = tf.sum(tf.reshape(dx, [B, T, C]), 0);
      acc("position_embedding.weight", L === T ? dpos : tf.pad(dpos, [[0, L - T], [0, 0]]));
    }
    return {acts: acts, grads: grads, loss: loss, weightGrads: dW};
  }

  /* One forward and backward pass. weights: {name: Float32Array}; batch: {idx, targets} (B*T ids).
   * opts.wiring overrides the norm placement of the forward pass (the tests' negative control). */
  function gradientFlow(setting, weights, batch, opts) {
    var tf = root.tf;
    if (!tf) fail("TensorFlow.js (the global tf) is not loaded");
    var s = checkSetting(setting), norm = (opts && opts.wiring) || s.norm;
    var N = BATCH * SEQ;
    shapes(s).forEach(function (e) {
      var a = weights[e[0]], n = e[1].reduce(function (x, y) { return x * y; }, 1);
      if (!a || a.length !== n) fail("weight " + e[0] + " must have " + n + " values, got " + (a ? a.length : "none"));
    });
    if (!batch || typeof batch !== "object") fail("a batch must be an object {idx, targets}, got " + shown(batch));
    [["idx", batch.idx], ["targets", batch.targets]].forEach(function (named) {
      var what = named[0], ids = named[1];
      if (!ids || typeof ids !== "object" || typeof ids.length !== "number")
        fail("batch." + what + " must be an array of " + N + " token ids, got " + shown(ids));
      if (ids.length !== N) fail("a batch has " + N + " token ids, got " + ids.length + " in batch." + what);
      for (var i = 0; i < N; i++) {  // a whole number: not 1.5 (int32 would truncate it), "3" or true
        var v = ids[i], where = " (batch." + what + "[" + i + "])", allowed = ": token ids are integers from 0 to " + (VOCAB - 1);
        if (typeof v !== "number") {
          var kind = v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : "a " + typeof v;
          fail("token id " + shown(v) + where + " is " + kind + ", not a number" + allowed);
        }
        if (!Number.isInteger(v)) fail("token id " + shown(v) + where + " is not an integer" + allowed);
        if (v < 0 || v >= VOCAB) fail("token id " + v + " is outside the vocabulary [0, " + VOCAB + ")" + where);
      }
    });
    return tf.tidy(function () {
      var W = {};
      shapes(s).forEach(function (e) { W[e[0]] = tf.tensor(weights[e[0]], e[1], "float32"); });
      // the negative control wires post-norm where the weights have no final norm, or none where they have
      if (norm === "pre" && !W["final_norm.weight"]) fail("pre-norm wiring needs final_norm weights");
      var idx = tf.tensor1d(batch.idx, "int32"), oneHot = tf.oneHot(tf.tensor1d(batch.targets, "int32"), VOCAB);
      return summary(s, passes(s, W, {}, norm, idx, oneHot));
    });
  }

  /* The probe's tensors read back: the RMS at every boundary, the loss, and what they say. */
  function summary(s, r) {
    var act = r.acts.map(function (t) { return rms(t.dataSync()); });
    var grad = r.grads.map(function (t) { return rms(t.dataSync()); });
    var lossValue = r.loss.dataSync()[0];
    var finite = isFinite(lossValue) && act.concat(grad).every(isFinite);
    var status = !finite ? "diverged" : grad[0] > 0 ? "ok" : "vanished";
    return {act: act, grad: grad, loss: lossValue, finite: finite, status: status,
            ratio: grad[s.depth] !== 0 ? grad[0] / grad[s.depth] : NaN};
  }

  /* The explorer's last drawn model, held between measurements. The weights depend only on the seed,
   * width and depth, so a change of lambda_0, norm or residual (and each setting's grey reference)
   * reuses its tensors and makes only LayerScale's vectors anew. Its draws are held unscaled, as
   * tensors: blocks are drawn in order, so a model of another depth with the same seed and width is
   * the same draws, scaled by GPT-2's standard deviations on the backend (the residual projections'
   * depend on the depth), and only blocks not drawn yet are drawn. Exactly initWeights's weights and
   * randomBatch's batch (tested). */
  var held = null;
  function heldModel(s) {
    var tf = root.tf, key = s.seed + "|" + s.width;
    // every tensor any wiring uses: pre-norm's (the norms and the final norm), LayerScale's left out
    var all = {width: s.width, depth: s.depth, norm: "pre", layerscale: null, seed: s.seed};
    if (!held || held.key !== key) {
      if (held) held.drawnTensors.concat(held.scaledTensors).forEach(function (t) { t.dispose(); });
      var batch = randomBatch(s.seed), idx = tf.tensor1d(batch.idx, "int32");
      var oneHot = tf.tidy(function () { return tf.oneHot(tf.tensor1d(batch.targets, "int32"), VOCAB); });
      held = {key: key, next: rng(1000003 * s.seed + 17), unit: {}, unitT: {}, depth: null, W: {}, WT: {},
              drawnTensors: [idx, oneHot].map(tf.keep), scaledTensors: [], idx: idx, oneHot: oneHot};
    }
    if (held.depth === s.depth) return held;
    held.scaledTensors.forEach(function (t) { t.dispose(); });
    held.scaledTensors = [];
    var W = {}, WT = {};
    shapes(all).forEach(function (e) {  // in initWeights's order: a block is drawn once, when first needed
      var name = e[0], n = e[1].reduce(function (a, b) { return a * b; }, 1);
      var byDepth = isNormal(name) && gpt2Std(name, 1) !== INIT_STD;  // the residual projections
      if (!held.unit[name]) {  // drawn at std 1 and kept so where the std depends on the depth, else scaled now
        var a = !isNormal(name) ? new Float32Array(n).fill(/\.bias$/.test(name) ? 0 : 1)  // biases 0, gains 1
          : normals(n, byDepth ? 1 : INIT_STD, held.next);
        held.unit[name] = tf.keep(tf.tensor(a, e[1], "float32"));
        held.drawnTensors.push(held.unit[name]);
        if (e[1].length === 2 && !/position/.test(name)) {
          held.unitT[name] = tf.keep(tf.transpose(held.unit[name]));
          held.drawnTensors.push(held.unitT[name]);
        }
      }
      if (!byDepth) { W[name] = held.unit[name]; WT[name] = held.unitT[name]; return; }
      var std = gpt2Std(name, s.depth);
      W[name] = tf.keep(tf.mul(held.unit[name], std));
      held.scaledTensors.push(W[name]);
      if (held.unitT[name]) {
        WT[name] = tf.keep(tf.mul(held.unitT[name], std));
        held.scaledTensors.push(WT[name]);
      }
    });
    held.W = W;
    held.WT = WT;
    held.depth = s.depth;
    return held;
  }
  function isNormal(name) { return /\.weight$/.test(name) && !/ln_\d\.|final_norm\./.test(name); }

  /* The whole live measurement of a setting: seeded weights, seeded batch, one pass. */
  function measure(setting) {
    var tf = root.tf;
    if (!tf) fail("TensorFlow.js (the global tf) is not loaded");
    var s = checkSetting(setting), h = heldModel(s);
    return tf.tidy(function () {
      var W = {};
      shapes(s).forEach(function (e) {
        W[e[0]] = /\.scale$/.test(e[0]) ? tf.fill(e[1], s.layerscale) : h.W[e[0]];
      });
      return summary(s, passes(s, W, h.WT, s.norm, h.idx, h.oneHot));
    });
  }

  /* Python's "%g" (6 significant digits), so a live lambda's label reads like the shipped ones. */
  function formatG(v) {
    if (v === 0) return "0";
    var e = Math.floor(Math.log10(Math.abs(v)));
    var p = Number(v.toPrecision(6));
    e = Math.floor(Math.log10(Math.abs(p)));
    if (e < -4 || e >= 6) {
      var m = (p / Math.pow(10, e)).toPrecision(6).replace(/\.?0+$/, "");
      return m + "e" + (e < 0 ? "-" : "+") + (Math.abs(e) < 10 ? "0" : "") + Math.abs(e);
    }
    return String(p);
  }

  /* A Web Worker's TensorFlow.js backend (its `tf` a global, the vendored files beside the worker):
   * WebAssembly where the browser has it, else TensorFlow.js's plain JavaScript backend, slower but
   * exact. A promise of the backend's name, "wasm" or "cpu". */
  function startBackend() {
    var tf = root.tf;
    return (async function () {
      try {
        tf.wasm.setWasmPaths(new URL("vendor/tfjs/", root.location.href).href);
        if (await tf.setBackend("wasm")) return "wasm";
      } catch (e) { /* no WebAssembly here */ }
      await tf.setBackend("cpu");
      return "cpu";
    })();
  }

  root.AndreaFlow = {
    VOCAB: VOCAB, SEQ: SEQ, BATCH: BATCH, HEAD_DIM: HEAD_DIM,
    checkSetting: checkSetting, shapes: shapes, initWeights: initWeights, randomBatch: randomBatch,
    gradientFlow: gradientFlow, measure: measure, formatG: formatG, passes: passes,
    rng: rng, normals: normals,  // the seeded generator, also used by andrea_attention.js's untrained model
    shown: shown,  // a bad value as the reader typed it, for every checker's error message
    startBackend: startBackend,  // the Web Workers' TensorFlow.js backend
  };
})(typeof self !== "undefined" ? self : this);
