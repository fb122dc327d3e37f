/* ANDREA's gradient-flow probe in the browser, on TensorFlow.js.
 *
 * The same model as andrea/model/transformer.py and andrea/model/layers.py, at the explorer's settings (GELU-tanh
 * MLP, causal multi-head attention with 32-dimensional heads, learned position embeddings, a tied
 * output head, biases, LayerNorm eps 1e-5), and the same measurement as andrea.measure.probe.gradient_flow:
 * one forward and backward pass on a fixed batch, the RMS of the residual stream and of the loss's
 * gradient with respect to it at every block boundary (0 = the embeddings' output, i = block i's
 * output). The gradient comes from TensorFlow.js's automatic differentiation (tf.grads); nothing
 * here differentiates by hand.
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
  var GELU_C = Math.sqrt(2 / Math.PI);

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
        (typeof out.layerscale !== "number" || !(out.layerscale >= 1e-6 && out.layerscale <= 1)))
      fail("layerscale must be null (off) or a number from 1e-6 to 1, got " + shown(s.layerscale));
    if (!Number.isInteger(out.seed) || out.seed < 0 || out.seed > 10000)
      fail("seed must be an integer from 0 to 10000, got " + shown(s.seed));
    return out;
  }

  /* mulberry32: a small seeded generator, so a seed gives the same batch and weights everywhere. */
  function rng(seed) {
    var a = (seed >>> 0) ^ 0x9e3779b9;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      var t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function normals(n, std, next) {  // Box-Muller, two values per pair of uniforms
    var out = new Float32Array(n);
    for (var i = 0; i < n; i += 2) {
      var u = 1 - next(), v = next();
      var r = Math.sqrt(-2 * Math.log(u)) * std;
      out[i] = r * Math.cos(2 * Math.PI * v);
      if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * v);
    }
    return out;
  }

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
      else if (/proj\.weight$/.test(name)) a = normals(n, INIT_STD / Math.sqrt(2 * s.depth), next);
      else a = normals(n, INIT_STD, next);
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

  /* The model's forward pass on TensorFlow.js tensors, for a batch of B sequences of T tokens (N = B*T
   * rows). W: {state_dict name: tensor}; s: a checked setting (s.heads: the number of heads, default
   * width / 32). opts.wiring overrides the norm placement (the tests' negative control); with
   * opts.weightGrads the products pass gradients to the weights as well (training), else to their
   * input only (the probe, whose weights are constants). Returns embed(idx) -> the stream entering
   * block 0, block(x, i), and loss(x, oneHotTargets): the final norm, the tied head and the mean
   * cross-entropy. Call it inside tf.tidy. */
  function network(s, W, B, T, opts) {
    var tf = root.tf, norm = (opts && opts.wiring) || s.norm, train = !!(opts && opts.weightGrads);
    var C = s.width, H = s.heads || C / HEAD_DIM, D = C / H, N = B * T;
    var mask = tf.mul(tf.sub(tf.linalg.bandPart(tf.ones([T, T]), -1, 0), 1), 1e30);  // 0 on and below the diagonal

    // y = x W^T + b, with torch's W (out, in). TensorFlow.js's matMul is several times slower with a
    // transposed operand on WebAssembly, so for the probe both layouts are kept and each product is a
    // plain one: forward x (in, out-layout W^T), backward dy W. This states matMul's own gradient for x
    // (the weights are constants there); tf.grads still differentiates everything else. Training needs
    // the weights' gradients too, and differentiates the product itself.
    // a @ b whose gradients are plain products too (dA = dY B^T, dB = A^T dY, with the transposes
    // made explicitly): on WebAssembly a product with a transposed operand is several times slower,
    // and autodiff's own matMul gradient uses two
    var mm = tf.customGrad(function (a, b, save) {
      save([a, b]);
      return {value: tf.matMul(a, b), gradFunc: function (dy, saved) {
        var perm = dy.rank === 3 ? [0, 2, 1] : [1, 0];
        return [tf.matMul(dy, tf.transpose(saved[1], perm)), tf.matMul(tf.transpose(saved[0], perm), dy)];
      }};
    });
    function bmm(a, b) { return train ? mm(a, b) : tf.matMul(a, b); }
    var WT = {};
    function product(name) {
      if (!WT[name]) {
        var w = W[name];
        if (train) WT[name] = function (x) { return mm(x, tf.transpose(w)); };
        else {
          var wt = tf.transpose(w);
          WT[name] = tf.customGrad(function (x) {
            return {value: tf.matMul(x, wt), gradFunc: function (dy) { return [tf.matMul(dy, w)]; }};
          });
        }
      }
      return WT[name];
    }
    function linear(x, name) {
      return tf.add(product(name + ".weight")(x), W[name + ".bias"]);
    }
    function layerNorm(x, name) {
      var m = tf.moments(x, -1, true);
      return tf.add(tf.mul(tf.mul(tf.sub(x, m.mean), tf.rsqrt(tf.add(m.variance, LN_EPS))), W[name + ".weight"]), W[name + ".bias"]);
    }
    function heads(t) { return tf.reshape(tf.transpose(tf.reshape(t, [B, T, H, D]), [0, 2, 1, 3]), [B * H, T, D]); }
    function attention(x, p) {
      var qkv = tf.split(linear(x, p + "attn.qkv"), 3, 1);
      var kT = train ? tf.transpose(heads(qkv[1]), [0, 2, 1]) : null;
      var qk = train ? bmm(heads(qkv[0]), kT) : tf.matMul(heads(qkv[0]), heads(qkv[1]), false, true);
      var scores = tf.add(tf.mul(qk, 1 / Math.sqrt(D)), mask);
      var y = bmm(tf.softmax(scores), heads(qkv[2]));  // (B*H, T, D)
      y = tf.reshape(tf.transpose(tf.reshape(y, [B, H, T, D]), [0, 2, 1, 3]), [N, C]);
      return linear(y, p + "attn.proj");
    }
    function mlp(x, p) {
      var h = linear(x, p + "mlp.fc");
      var inner = tf.mul(tf.add(h, tf.mul(tf.mul(tf.mul(h, h), h), 0.044715)), GELU_C);
      var g = tf.mul(tf.mul(h, 0.5), tf.add(tf.tanh(inner), 1));
      return linear(g, p + "mlp.proj");
    }
    function sublayer(x, p, i, f) {
      var ln = p + "ln_" + i, ls = W[p + "ls_" + i + ".scale"];
      var scale = function (d) { return ls ? tf.mul(d, ls) : d; };
      if (norm === "post") { var d = scale(f(x, p)); return layerNorm(s.residual ? tf.add(x, d) : d, ln); }
      var delta = scale(f(norm === "pre" ? layerNorm(x, ln) : x, p));
      return s.residual ? tf.add(x, delta) : delta;
    }
    return {
      embed: function (idx) {
        var pos = W["position_embedding.weight"];
        if (pos.shape[0] !== T) pos = tf.slice(pos, [0, 0], [T, C]);  // the first T positions
        var E = W["token_embedding.weight"];
        // training differentiates the table: gather's gradient has no WebAssembly kernel, a one-hot
        // product's has
        var tok = train ? tf.matMul(tf.cast(tf.oneHot(idx, E.shape[0]), "float32"), E) : tf.gather(E, idx);
        return tf.add(tok, tf.tile(pos, [B, 1]));
      },
      block: function (x, i) {
        var p = "blocks." + i + ".";
        return sublayer(sublayer(x, p, 1, attention), p, 2, mlp);
      },
      loss: function (x, oneHot) {
        if (norm === "pre") x = layerNorm(x, "final_norm");
        var logp = tf.logSoftmax(product("token_embedding.weight")(x));  // the tied head: x E^T
        return tf.div(tf.neg(tf.sum(tf.mul(logp, oneHot))), N);
      },
    };
  }

  /* One forward and backward pass. weights: {name: Float32Array}; batch: {idx, targets} (B*T ids).
   * opts.wiring overrides the norm placement of the forward pass (the tests' negative control). */
  function gradientFlow(setting, weights, batch, opts) {
    var tf = root.tf;
    if (!tf) fail("TensorFlow.js (the global tf) is not loaded");
    var s = checkSetting(setting), norm = (opts && opts.wiring) || s.norm;
    var C = s.width, B = BATCH, T = SEQ, N = B * T;
    shapes(s).forEach(function (e) {
      var a = weights[e[0]], n = e[1].reduce(function (x, y) { return x * y; }, 1);
      if (!a || a.length !== n) fail("weight " + e[0] + " must have " + n + " values, got " + (a ? a.length : "none"));
    });
    [batch.idx, batch.targets].forEach(function (ids) {
      if (ids.length !== N) fail("a batch has " + N + " token ids, got " + ids.length);
      for (var i = 0; i < N; i++)
        if (!(ids[i] >= 0 && ids[i] < VOCAB)) fail("token id " + ids[i] + " is outside the vocabulary [0, " + VOCAB + ")");
    });
    var W = {}, keep = [];
    return tf.tidy(function () {
      shapes(s).forEach(function (e) { W[e[0]] = tf.tensor(weights[e[0]], e[1], "float32"); });
      var idx = tf.tensor1d(batch.idx, "int32"), oneHot = tf.oneHot(tf.tensor1d(batch.targets, "int32"), VOCAB);
      var net = network(s, W, B, T, {wiring: norm});
      var x0 = net.embed(idx);
      // The loss as a function of a zero added at every boundary: its gradient with respect to
      // each zero is the gradient with respect to the residual stream there.
      var zeros = [];
      for (var b = 0; b <= s.depth; b++) zeros.push(tf.zeros([N, C]));
      var acts = [];
      function loss() {
        var x = tf.add(x0, arguments[0]);
        acts.push(tf.keep(x));
        for (var i = 0; i < s.depth; i++) {
          x = tf.add(net.block(x, i), arguments[i + 1]);
          acts.push(tf.keep(x));
        }
        return net.loss(x, oneHot);
      }
      var vg = tf.valueAndGrads(loss)(zeros);
      keep = acts;
      var act = acts.map(function (t) { return rms(t.dataSync()); });
      var grad = vg.grads.map(function (t) { return rms(t.dataSync()); });
      var lossValue = vg.value.dataSync()[0];
      keep.forEach(function (t) { t.dispose(); });
      var finite = isFinite(lossValue) && act.concat(grad).every(isFinite);
      var status = !finite ? "diverged" : grad[0] > 0 ? "ok" : "vanished";
      return {act: act, grad: grad, loss: lossValue, finite: finite, status: status,
              ratio: grad[s.depth] !== 0 ? grad[0] / grad[s.depth] : NaN};
    });
  }

  /* The whole live measurement of a setting: seeded weights, seeded batch, one pass. */
  function measure(setting) {
    var s = checkSetting(setting);
    return gradientFlow(s, initWeights(s), randomBatch(s.seed));
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
    gradientFlow: gradientFlow, measure: measure, formatG: formatG, network: network,
    rng: rng, normals: normals,  // the seeded generator, also used by andrea_attention.js's untrained model
    shown: shown,  // a bad value as the reader typed it, for every checker's error message
    startBackend: startBackend,  // the Web Workers' TensorFlow.js backend
  };
})(typeof self !== "undefined" ? self : this);
