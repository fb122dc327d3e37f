/* Attention on the reader's own text, computed in the page: ANDREA's tokenizer, its weights and the
 * forward pass up to every block's attention weights, in plain JavaScript.
 *
 * The same model as andrea/model/layers.py and andrea/model/transformer.py (pre-norm GPT-2 blocks:
 * x = x + attn(LN1(x)); x = x + mlp(LN2(x)); LayerNorm eps from the config, GELU with the tanh
 * approximation, one fused q,k,v Linear split in that order, heads of d_model / n_head, scores
 * q.k / sqrt(head_dim), a causal mask, learned token and position embeddings), and the same maps as
 * andrea.measure.analysis.attention_maps: each block's softmax weights, queries and keys from LN1 of
 * the block's input. Products accumulate in float64 from float32 weights (torch accumulates in
 * float32): the two agree to about 1e-6.
 *
 * * tokenizer(json): the book's byte-level BPE (the GPT-2 scheme) from its Hugging Face tokenizer.json;
 * * readSafetensors(buffer): F16 and F32 tensors as Float32Arrays, with their shapes;
 * * untrainedWeights(config, seed): GPT-2's initialisation at the config's shapes, drawn with
 *   andrea_flow.js's seeded generator (AndreaFlow.rng, AndreaFlow.normals);
 * * attend(config, weights, ids): every block's and head's T x T attention weights;
 * * mount(el, opts): the viewer (page only): a text box, model / block / head choices, a heatmap.
 *   Its model runs in andrea_attention_worker.js, off the page's main thread.
 *
 * Runs in a page, in a Web Worker and in Node (module.exports).
 */
(function (root) {
  "use strict";
  // What a reader does to see a cell's tokens: a touch screen has no hover.
  var POINT = typeof window !== "undefined" && window.matchMedia && window.matchMedia("(hover: none)").matches
    ? "tap" : "hover over or click";
  var MAX_TOKENS = 64;  // the viewer's limit: a readable heatmap, and a forward pass of well under a second
  var GELU_C = Math.sqrt(2 / Math.PI);
  var MODELS = ["trained", "untrained"];

  function fail(msg) { throw new Error(msg); }
  function shown(v) {  // a value as the caller gave it (JSON.stringify would print NaN as null)
    if (typeof v === "number" && !isFinite(v)) return String(v);
    if (v === undefined) return "undefined";
    if (typeof v === "string" && v.length > 40) return JSON.stringify(v.slice(0, 40) + "…");
    try { return JSON.stringify(v); } catch (e) { return String(v); }
  }

  // -----------------------------------------------------------------------------------------------
  // The tokenizer: byte-level BPE, GPT-2's scheme, as Hugging Face tokenizers runs it
  // -----------------------------------------------------------------------------------------------
  /* GPT-2's map from the 256 byte values to printable characters (bytes_to_unicode). */
  function byteChars() {
    var bs = [], cs, i, n = 0, map = new Array(256);
    for (i = 33; i <= 126; i++) bs.push(i);
    for (i = 161; i <= 172; i++) bs.push(i);
    for (i = 174; i <= 255; i++) bs.push(i);
    cs = bs.slice();
    for (i = 0; i < 256; i++) if (bs.indexOf(i) < 0) { bs.push(i); cs.push(256 + n); n++; }
    bs.forEach(function (b, k) { map[b] = String.fromCharCode(cs[k]); });
    return map;
  }

  /* GPT-2's pre-tokenizer pattern. Hugging Face runs it with Oniguruma, whose \s is
   * [\t\n\v\f\r], U+0085 and the Unicode separators (Zs, Zl, Zp); JavaScript's \s differs (it has
   * U+FEFF and lacks U+0085), so the class is spelled out. */
  var WS = "\\t\\n\\v\\f\\r\\u0085\\p{Zs}\\p{Zl}\\p{Zp}";
  var SPLIT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + WS + "\\p{L}\\p{N}]+|[" + WS + "]+(?![^" + WS +
    "])|[" + WS + "]+";

  function utf8(s) {
    if (typeof TextEncoder !== "undefined") return new TextEncoder().encode(s);
    return Uint8Array.from(Buffer.from(s, "utf8"));  // Node without TextEncoder (very old)
  }

  /* A readable label for a token's bytes: its text when they are whole UTF-8 characters (a space shown
   * as ␣, a newline as ↵, a tab as ⇥), else the bytes in hex (a piece of one character). */
  function displayText(bytes) {
    var text;
    try { text = new TextDecoder("utf-8", {fatal: true}).decode(bytes); } catch (e) { text = null; }
    if (text === null) return "⟨" + Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join(" ") + "⟩";
    return text.replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/\r/g, "␍")
      .replace(/[\u0000-\u001f\u007f-\u009f]/g, function (c) { return "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"); });
  }

  /* tokenizer(json): json is the Hugging Face tokenizer's JSON (text or parsed). Returns
   * {encode(text) -> ids, tokens(text) -> [{id, text}], display(id), vocabSize}. */
  function tokenizer(json) {
    var spec = json;
    if (typeof json === "string") {
      try { spec = JSON.parse(json); } catch (e) { fail("tokenizer.json is not JSON (" + e.message + ")"); }
    }
    if (!spec || typeof spec !== "object") fail("tokenizer.json must hold an object, got " + shown(spec));
    var model = spec.model || {}, pre = spec.pre_tokenizer || {};
    if (model.type !== "BPE" || !model.vocab || !Array.isArray(model.merges))
      fail("tokenizer.json is not a BPE tokenizer with a vocabulary and merges (model type " + shown(model.type) + ")");
    if (pre.type !== "ByteLevel" || pre.add_prefix_space || pre.use_regex === false)
      fail("tokenizer.json must pre-tokenize byte-level with GPT-2's pattern and no prefix space, got " + shown(pre));
    if (spec.normalizer) fail("tokenizer.json has a normalizer (" + shown(spec.normalizer.type) + "), which this tokenizer does not run");
    var vocab = new Map(), idToToken = [], ranks = new Map(), cache = new Map();
    Object.keys(model.vocab).forEach(function (tok) { vocab.set(tok, model.vocab[tok]); idToToken[model.vocab[tok]] = tok; });
    model.merges.forEach(function (m, r) {
      var pair = Array.isArray(m) ? m : String(m).split(" ");
      if (pair.length !== 2) fail("tokenizer.json: merge " + r + " is not a pair of tokens: " + shown(m));
      ranks.set(pair[0] + " " + pair[1], r);
    });
    var special = (spec.added_tokens || []).filter(function (t) { return t.content; });
    special.forEach(function (t) { vocab.set(t.content, t.id); idToToken[t.id] = t.content; });
    var toChar = byteChars(), toByte = {};
    toChar.forEach(function (ch, b) { toByte[ch] = b; });
    var vocabSize = Math.max(idToToken.length, vocab.size);
    var maxBytes = 1;  // the longest token, in bytes: a word of n bytes has at least n / maxBytes tokens
    vocab.forEach(function (id, t) { if (t.length > maxBytes) maxBytes = t.length; });

    function bpe(word) {  // the merges by rank, lowest first, every occurrence left to right
      var hit = cache.get(word);
      if (hit) return hit;
      var parts = word.split(""), i;  // the byte characters are all below U+0200: one code unit each
      while (parts.length > 1) {
        var best = Infinity, a = null, b = null;
        for (i = 0; i < parts.length - 1; i++) {
          var r = ranks.get(parts[i] + " " + parts[i + 1]);
          if (r !== undefined && r < best) { best = r; a = parts[i]; b = parts[i + 1]; }
        }
        if (a === null) break;
        var out = [];
        for (i = 0; i < parts.length;) {
          if (i < parts.length - 1 && parts[i] === a && parts[i + 1] === b) { out.push(a + b); i += 2; }
          else { out.push(parts[i]); i++; }
        }
        parts = out;
      }
      var ids = parts.map(function (p) {
        var id = vocab.get(p);
        if (id === undefined) fail("tokenizer.json has no token " + shown(p) + " (a vocabulary without all 256 bytes?)");
        return id;
      });
      if (cache.size > 20000) cache.clear();
      cache.set(word, ids);
      return ids;
    }

    /* Appends the tokens of ``text`` (no special tokens in it) to ``ids``. With a ``cap``, a word that alone
     * has more than ``cap`` tokens (by its length: at least bytes / maxBytes) is not split into tokens, only
     * counted in ``ids.skipped`` by that bound: a long run of text with no space costs no BPE. */
    function encodePlain(text, ids, cap) {
      var re = new RegExp(SPLIT, "gu"), m;
      while ((m = re.exec(text)) !== null) {
        var bytes = utf8(m[0]), word = "";
        var least = Math.ceil(bytes.length / maxBytes);
        if (cap !== undefined && least > cap) { ids.skipped = (ids.skipped || 0) + least; continue; }
        for (var i = 0; i < bytes.length; i++) word += toChar[bytes[i]];
        var got = bpe(word);
        for (i = 0; i < got.length; i++) ids.push(got[i]);  // one at a time: push.apply overflows the stack
      }
    }

    /* The token ids of ``text``. With a ``cap`` (the viewer's limit), a text over it may be counted only
     * in part: ``ids.skipped`` then holds a lower bound on the tokens left out (``encodePlain``). */
    function encode(text, cap) {
      if (typeof text !== "string") fail("the text must be a string, got " + shown(text));
      var ids = [], rest = text;
      while (rest.length) {  // special tokens (<|endoftext|>) are matched in the raw text first
        var at = -1, which = null;
        special.forEach(function (t) {
          var k = rest.indexOf(t.content);
          if (k >= 0 && (at < 0 || k < at || (k === at && t.content.length > which.content.length))) { at = k; which = t; }
        });
        if (at < 0) { encodePlain(rest, ids, cap); break; }
        encodePlain(rest.slice(0, at), ids, cap);
        ids.push(which.id);
        rest = rest.slice(at + which.content.length);
      }
      return ids;
    }

    function display(id) {
      var tok = idToToken[id];
      if (tok === undefined) fail("token id " + shown(id) + " is outside the vocabulary [0, " + vocabSize + ")");
      if (special.some(function (t) { return t.id === id; })) return tok;
      return displayText(Uint8Array.from(tok, function (ch) { return toByte[ch]; }));
    }

    return {
      vocabSize: vocabSize,
      encode: encode,
      display: display,
      tokens: function (text) { return encode(text).map(function (id) { return {id: id, text: display(id)}; }); },
    };
  }

  /* The viewer's input check: the text's tokens, or an error naming what is wrong and what is allowed. */
  function prepare(tok, text, limit) {
    limit = limit === undefined ? MAX_TOKENS : limit;
    if (typeof text !== "string") fail("the text must be a string, got " + shown(text));
    if (text.trim() === "") fail("The text is empty: type a sentence (1 to " + limit + " tokens).");
    var ids = tok.encode(text, limit);
    if (ids.skipped) {
      var least = ids.length + ids.skipped;
      fail("Your text has at least " + least + " tokens; the viewer takes at most " + limit + ". Shorten it by at least " +
           (least - limit) + " tokens (a long run of characters with no space makes many tokens).");
    }
    if (ids.length > limit)
      fail("Your text has " + ids.length + " tokens; the viewer takes at most " + limit + ". Shorten it by " +
           (ids.length - limit) + " token" + (ids.length - limit === 1 ? "" : "s") + ".");
    return ids.map(function (id) { return {id: id, text: tok.display(id)}; });
  }

  // -----------------------------------------------------------------------------------------------
  // Weights: safetensors, and GPT-2's initialisation from a seed
  // -----------------------------------------------------------------------------------------------
  var HALF = null;
  function halfTable() {  // every float16 bit pattern's value, once
    if (HALF) return HALF;
    HALF = new Float32Array(65536);
    for (var h = 0; h < 65536; h++) {
      var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
      HALF[h] = e === 0 ? s * f * Math.pow(2, -24) : e === 31 ? (f ? NaN : s * Infinity) : s * (1 + f / 1024) * Math.pow(2, e - 15);
    }
    return HALF;
  }

  /* readSafetensors(buffer): {metadata, tensors: {name: {dtype, shape, data: Float32Array}}} from an
   * ArrayBuffer (or a typed array over one) of a .safetensors file; F16 and F32 only. */
  function readSafetensors(buffer) {
    var bytes;
    if (buffer instanceof ArrayBuffer) bytes = new Uint8Array(buffer);
    else if (ArrayBuffer.isView(buffer)) bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    else fail("safetensors: expected the file's bytes (an ArrayBuffer), got " + shown(typeof buffer));
    if (bytes.length < 8) fail("safetensors: the file has " + bytes.length + " bytes, fewer than its 8-byte header length (empty or truncated)");
    var dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    var lo = dv.getUint32(0, true), hi = dv.getUint32(4, true);
    if (hi !== 0 || lo > 100e6 || 8 + lo > bytes.length)
      fail("safetensors: the header claims " + (hi ? "more than 4 GB" : lo + " bytes") + " but the file has " + bytes.length +
           " bytes (truncated, or not a safetensors file)");
    var header;
    try { header = JSON.parse(new TextDecoder("utf-8").decode(bytes.subarray(8, 8 + lo))); }
    catch (e) { fail("safetensors: the header is not JSON (not a safetensors file?): " + e.message); }
    if (!header || typeof header !== "object" || Array.isArray(header)) fail("safetensors: the header is not a JSON object");
    var start = 8 + lo, size = {F16: 2, F32: 4}, out = {metadata: header.__metadata__ || {}, tensors: {}};
    Object.keys(header).forEach(function (name) {
      if (name === "__metadata__") return;
      var t = header[name];
      if (!t || !Array.isArray(t.shape) || !Array.isArray(t.data_offsets) || t.data_offsets.length !== 2)
        fail("safetensors: tensor " + shown(name) + " has no shape or data_offsets");
      if (!size[t.dtype]) fail("safetensors: tensor " + shown(name) + " has dtype " + shown(t.dtype) + "; this reader takes F16 and F32");
      var n = t.shape.reduce(function (a, b) {
        if (!Number.isInteger(b) || b < 0) fail("safetensors: tensor " + shown(name) + " has a bad shape " + shown(t.shape));
        return a * b;
      }, 1);
      var a = start + t.data_offsets[0], b = start + t.data_offsets[1];
      if (!(Number.isInteger(a) && Number.isInteger(b) && a >= start && a <= b && b <= bytes.length))
        fail("safetensors: tensor " + shown(name) + "'s bytes " + shown(t.data_offsets) + " lie outside the file (" +
             (bytes.length - start) + " data bytes): truncated?");
      if (b - a !== n * size[t.dtype])
        fail("safetensors: tensor " + shown(name) + " of shape " + shown(t.shape) + " needs " + n * size[t.dtype] +
             " bytes of " + t.dtype + ", its offsets give " + (b - a));
      var raw = bytes.slice(a, b).buffer, data;  // a copy: aligned for the typed array
      if (t.dtype === "F32") data = new Float32Array(raw);
      else {
        var h = new Uint16Array(raw), table = halfTable();
        data = new Float32Array(n);
        for (var i = 0; i < n; i++) data[i] = table[h[i]];
      }
      out.tensors[name] = {dtype: t.dtype, shape: t.shape.slice(), data: data};
    });
    return out;
  }

  /* {name: Float32Array} from readSafetensors's tensors, every value a finite number (a weights file with a
   * NaN or an infinity in it is damaged: it is named, not drawn as a blank heatmap). */
  function weightsOf(file) {
    var w = {}, bad = [], count = 0;
    Object.keys(file.tensors).forEach(function (k) {
      var d = file.tensors[k].data, n = 0;
      for (var i = 0; i < d.length; i++) if (!isFinite(d[i])) n++;
      if (n) { bad.push(k); count += n; }
      w[k] = d;
    });
    if (count)
      fail("the weights file holds " + count + " non-finite value" + (count === 1 ? "" : "s") + " (NaN or infinity), in " + bad.slice(0, 3).join(", ") + (bad.length > 3 ? " and " + (bad.length - 3) + " more tensors" : "") +
           ": it is damaged; build the book again (make book) to write it afresh");
    return w;
  }

  var CONFIG_INTS = ["vocab_size", "context_length", "d_model", "n_layer", "n_head"];

  /* The config fields the page's model needs, checked: the model it computes is pre-norm ANDREA. */
  function checkConfig(c) {
    if (!c || typeof c !== "object") fail("config must be an object such as {d_model: 192, n_head: 6, ...}, got " + shown(c));
    CONFIG_INTS.forEach(function (k) {
      if (!Number.isInteger(c[k]) || c[k] < 1) fail("config." + k + " must be a positive integer, got " + shown(c[k]));
    });
    if (c.d_model % c.n_head) fail("config.d_model " + c.d_model + " is not divisible by config.n_head " + c.n_head);
    var want = {norm: "pre", activation: "gelu_tanh", bias: true, layerscale: null, residual: true};
    Object.keys(want).forEach(function (k) {
      var v = c[k] === undefined ? want[k] : c[k];
      if (v !== want[k]) fail("config." + k + " must be " + shown(want[k]) + " (the page computes pre-norm ANDREA only), got " + shown(c[k]));
    });
    var eps = c.ln_eps === undefined ? 1e-5 : c.ln_eps;
    if (typeof eps !== "number" || !(eps > 0 && eps <= 1)) fail("config.ln_eps must be a number in (0, 1], got " + shown(c.ln_eps));
    var std = c.init_std === undefined ? 0.02 : c.init_std;
    if (typeof std !== "number" || !(std > 0 && std <= 10)) fail("config.init_std must be a number in (0, 10], got " + shown(c.init_std));
    return {vocab_size: c.vocab_size, context_length: c.context_length, d_model: c.d_model, n_layer: c.n_layer,
            n_head: c.n_head, ln_eps: eps, init_std: std};
  }

  /* The state_dict's names and shapes, in the torch model's order (no LayerScale: the config has none). */
  function shapes(config) {
    var c = checkConfig(config), C = c.d_model, out = [["token_embedding.weight", [c.vocab_size, C]],
                                                       ["position_embedding.weight", [c.context_length, C]]];
    for (var i = 0; i < c.n_layer; i++) {
      var p = "blocks." + i + ".";
      out.push([p + "ln_1.weight", [C]], [p + "ln_1.bias", [C]],
               [p + "attn.qkv.weight", [3 * C, C]], [p + "attn.qkv.bias", [3 * C]],
               [p + "attn.proj.weight", [C, C]], [p + "attn.proj.bias", [C]],
               [p + "ln_2.weight", [C]], [p + "ln_2.bias", [C]],
               [p + "mlp.fc.weight", [4 * C, C]], [p + "mlp.fc.bias", [4 * C]],
               [p + "mlp.proj.weight", [C, 4 * C]], [p + "mlp.proj.bias", [C]]);
    }
    out.push(["final_norm.weight", [C]], ["final_norm.bias", [C]]);
    return out;
  }

  function flow() {
    var f = root.AndreaFlow;
    if (!f && typeof require === "function") { try { f = require("./andrea_flow.js").AndreaFlow; } catch (e) { f = null; } }
    if (!f || typeof f.rng !== "function" || typeof f.normals !== "function")
      fail("the untrained model is drawn with andrea_flow.js's generator (AndreaFlow.rng, AndreaFlow.normals), which is not loaded");
    return f;
  }

  /* GPT-2's initialisation at the config's shapes, drawn from `seed`: N(0, init_std^2) everywhere, the
   * residual output projections (attn.proj, mlp.proj) N(0, init_std^2 / (2 n_layer)), biases 0,
   * LayerNorm gains 1. The same distribution as torch's Andrea(config), from another generator. */
  function untrainedWeights(config, seed) {
    var c = checkConfig(config), f = flow(), w = {};
    seed = seed === undefined ? 0 : seed;
    if (!Number.isInteger(seed) || seed < 0 || seed > 1e9) fail("seed must be an integer from 0 to 1e9, got " + shown(seed));
    var next = f.rng(1000003 * seed + 17);
    shapes(c).forEach(function (e) {
      var name = e[0], n = e[1].reduce(function (a, b) { return a * b; }, 1);
      if (/\.bias$/.test(name)) w[name] = new Float32Array(n);
      else if (/(ln_\d|final_norm)\.weight$/.test(name)) w[name] = new Float32Array(n).fill(1);
      else if (/\.proj\.weight$/.test(name)) w[name] = f.normals(n, c.init_std / Math.sqrt(2 * c.n_layer), next);
      else w[name] = f.normals(n, c.init_std, next);
    });
    return w;
  }

  function checkWeights(c, w) {
    if (!w || typeof w !== "object") fail("weights must be an object {name: Float32Array}, got " + shown(w));
    shapes(c).forEach(function (e) {
      if (e[0] === "final_norm.weight" || e[0] === "final_norm.bias") return;  // not needed for the maps
      var a = w[e[0]], n = e[1].reduce(function (x, y) { return x * y; }, 1);
      if (!a || a.length !== n)
        fail("weight " + e[0] + " must have " + n + " values (shape " + shown(e[1]) + "), got " + (a ? a.length : "none"));
    });
  }

  // -----------------------------------------------------------------------------------------------
  // The forward pass, up to every block's attention weights
  // -----------------------------------------------------------------------------------------------
  /* y = x W^T + b with torch's W (out, in), float64 sums. Four tokens and two outputs at a time: each
   * value loaded serves two or four products (1.6 times as fast as one token and one output at a time). */
  function linear(x, T, nIn, W, b, nOut) {
    var y = new Float32Array(T * nOut), t = 0, o, i;
    for (; t + 3 < T; t += 4) {
      var x0 = t * nIn, x1 = x0 + nIn, x2 = x1 + nIn, x3 = x2 + nIn, y0 = t * nOut;
      for (o = 0; o + 1 < nOut; o += 2) {
        var w0 = o * nIn, w1 = w0 + nIn, a0 = 0, a1 = 0, a2 = 0, a3 = 0, c0 = 0, c1 = 0, c2 = 0, c3 = 0;
        for (i = 0; i < nIn; i++) {
          var u = W[w0 + i], v = W[w1 + i], p0 = x[x0 + i], p1 = x[x1 + i], p2 = x[x2 + i], p3 = x[x3 + i];
          a0 += p0 * u; a1 += p1 * u; a2 += p2 * u; a3 += p3 * u;
          c0 += p0 * v; c1 += p1 * v; c2 += p2 * v; c3 += p3 * v;
        }
        var bu = b[o], bv = b[o + 1];
        y[y0 + o] = bu + a0; y[y0 + nOut + o] = bu + a1; y[y0 + 2 * nOut + o] = bu + a2; y[y0 + 3 * nOut + o] = bu + a3;
        y[y0 + o + 1] = bv + c0; y[y0 + nOut + o + 1] = bv + c1; y[y0 + 2 * nOut + o + 1] = bv + c2; y[y0 + 3 * nOut + o + 1] = bv + c3;
      }
      for (; o < nOut; o++) for (var r = 0; r < 4; r++) y[y0 + r * nOut + o] = dot(x, x0 + r * nIn, W, o * nIn, nIn) + b[o];
    }
    for (; t < T; t++) for (o = 0; o < nOut; o++) y[t * nOut + o] = dot(x, t * nIn, W, o * nIn, nIn) + b[o];
    return y;
  }

  function dot(x, xo, W, wo, n) {
    var s = 0;
    for (var i = 0; i < n; i++) s += x[xo + i] * W[wo + i];
    return s;
  }

  /* One block's attention: every head's softmax weights into maps (from `at`), and the heads' outputs
   * (T, C), from the fused q, k, v rows (T, 3C). */
  function heads(qkv, T, C, H, scale, causal, maps, at) {
    var D = C / H, y = new Float32Array(T * C), row = new Float64Array(T), acc = new Float64Array(D), C3 = 3 * C;
    for (var h = 0; h < H; h++) {
      var base = at + h * T * T;
      for (var i = 0; i < T; i++) {
        var qo = i * C3 + h * D, last = causal ? i : T - 1, mx = -Infinity, sum = 0, j, k;
        for (j = 0; j <= last; j++) {
          var ko = j * C3 + C + h * D, s = 0;
          for (k = 0; k < D; k++) s += qkv[qo + k] * qkv[ko + k];
          s *= scale;
          row[j] = s;
          if (s > mx) mx = s;
        }
        for (j = 0; j <= last; j++) { row[j] = Math.exp(row[j] - mx); sum += row[j]; }
        acc.fill(0);
        for (j = 0; j <= last; j++) {
          var a = row[j] / sum, vo = j * C3 + 2 * C + h * D;
          maps[base + i * T + j] = a;
          for (k = 0; k < D; k++) acc[k] += a * qkv[vo + k];
        }
        for (k = 0; k < D; k++) y[i * C + h * D + k] = acc[k];
      }
    }
    return y;
  }

  function gelu(f) {  // in place, the tanh approximation
    for (var i = 0; i < f.length; i++) { var u = f[i]; f[i] = 0.5 * u * (1 + Math.tanh(GELU_C * (u + 0.044715 * u * u * u))); }
    return f;
  }

  function addInto(x, d) { for (var i = 0; i < x.length; i++) x[i] += d[i]; }

  function layerNorm(x, T, C, g, b, eps) {
    var y = new Float32Array(T * C);
    for (var t = 0; t < T; t++) {
      var o = t * C, m = 0, v = 0, i;
      for (i = 0; i < C; i++) m += x[o + i];
      m /= C;
      for (i = 0; i < C; i++) { var d = x[o + i] - m; v += d * d; }
      var r = 1 / Math.sqrt(v / C + eps);
      for (i = 0; i < C; i++) y[o + i] = (x[o + i] - m) * r * g[i] + b[i];
    }
    return y;
  }

  /* attend(config, weights, ids[, opts]) -> {T, n_layer, n_head, maps: Float32Array(n_layer * n_head * T * T)}:
   * maps[((l * n_head + h) * T + q) * T + k] is block l's head h's weight from query q on key k (0 for
   * k > q). opts (the tests' negative controls): {scale: false} drops 1/sqrt(head_dim), {causal: false}
   * lets every token see every other, {wiring: "post"} computes post-norm blocks. */
  function attend(config, weights, ids, opts) {
    var c = checkConfig(config), C = c.d_model, H = c.n_head, D = C / H, L = c.n_layer;
    opts = opts || {};
    checkWeights(c, weights);
    if (!ids || typeof ids.length !== "number") fail("token ids must be an array of integers, got " + shown(ids));
    var T = ids.length;
    if (T < 1) fail("token ids are empty: give at least one token");
    if (T > c.context_length) fail("there are " + T + " tokens; the model's context holds at most " + c.context_length);
    for (var n = 0; n < T; n++)
      if (!Number.isInteger(ids[n]) || ids[n] < 0 || ids[n] >= c.vocab_size)
        fail("token id " + shown(ids[n]) + " (position " + n + ") is outside the vocabulary [0, " + c.vocab_size + ")");
    var scale = opts.scale === false ? 1 : 1 / Math.sqrt(D), causal = opts.causal !== false, post = opts.wiring === "post";
    var E = weights["token_embedding.weight"], P = weights["position_embedding.weight"];
    var x = new Float32Array(T * C), maps = new Float32Array(L * H * T * T), t, i;
    for (t = 0; t < T; t++) for (i = 0; i < C; i++) x[t * C + i] = E[ids[t] * C + i] + P[t * C + i];
    for (var l = 0; l < L; l++) {
      var p = "blocks." + l + ".", eps = c.ln_eps;
      var h = post ? x : layerNorm(x, T, C, weights[p + "ln_1.weight"], weights[p + "ln_1.bias"], eps);
      var qkv = linear(h, T, C, weights[p + "attn.qkv.weight"], weights[p + "attn.qkv.bias"], 3 * C);
      var y = heads(qkv, T, C, H, scale, causal, maps, l * H * T * T);
      if (l === L - 1) break;  // the maps are all there: the last block's output changes none of them
      addInto(x, linear(y, T, C, weights[p + "attn.proj.weight"], weights[p + "attn.proj.bias"], C));
      if (post) x = layerNorm(x, T, C, weights[p + "ln_1.weight"], weights[p + "ln_1.bias"], eps);
      var h2 = post ? x : layerNorm(x, T, C, weights[p + "ln_2.weight"], weights[p + "ln_2.bias"], eps);
      var f = gelu(linear(h2, T, C, weights[p + "mlp.fc.weight"], weights[p + "mlp.fc.bias"], 4 * C));
      addInto(x, linear(f, T, 4 * C, weights[p + "mlp.proj.weight"], weights[p + "mlp.proj.bias"], C));
      if (post) x = layerNorm(x, T, C, weights[p + "ln_2.weight"], weights[p + "ln_2.bias"], eps);
    }
    for (i = 0; i < maps.length; i++)
      if (!isFinite(maps[i]))
        fail("the attention weights came out as " + maps[i] + " (block " + (Math.floor(i / (H * T * T)) + 1) +
             "): the weights give no finite numbers on this text");
    return {T: T, n_layer: L, n_head: H, maps: maps};
  }

  function checkIndex(what, v, n) {
    if (!Number.isInteger(v) || v < 1 || v > n) fail(what + " must be an integer from 1 to " + n + ", got " + shown(v));
  }

  /* One head's T x T weights (block and head counted from 1, as the viewer shows them). */
  function headMap(result, block, head) {
    checkIndex("block", block, result.n_layer);
    checkIndex("head", head, result.n_head);
    var n = result.T * result.T, at = ((block - 1) * result.n_head + (head - 1)) * n;
    return result.maps.subarray(at, at + n);
  }

  /* Mean over queries t >= 1 of each row's entropy over log(t + 1), the entropy of even attention on
   * the t + 1 tokens it sees (1 = even; andrea.measure.analysis.normalised_entropy). NaN for one token. */
  function normalisedEntropy(map, T) {
    var total = 0;
    for (var q = 1; q < T; q++) {
      var e = 0;
      for (var k = 0; k <= q; k++) { var a = map[q * T + k]; if (a > 0) e -= a * Math.log(a); }
      total += e / Math.log(q + 1);
    }
    return T > 1 ? total / (T - 1) : NaN;
  }

  /* For queries t >= 1: in how many the largest weight is on the token just before (t - 1), on the
   * first token (0), or on the token itself. */
  function strongest(map, T) {
    var out = {previous: 0, first: 0, self: 0, rows: Math.max(0, T - 1)};
    for (var q = 1; q < T; q++) {
      var best = 0;
      for (var k = 1; k <= q; k++) if (map[q * T + k] > map[q * T + best]) best = k;
      if (best === q - 1) out.previous++;
      if (best === 0) out.first++;
      if (best === q) out.self++;
    }
    return out;
  }

  // -----------------------------------------------------------------------------------------------
  // The viewer (a page's main thread): controls, a heatmap, a line that says what it shows
  // -----------------------------------------------------------------------------------------------
  var worker = null, workerProblem = null, nextId = 1, callbacks = {};

  function staticUrl(file) {
    var rootAttr = document.documentElement.getAttribute("data-content_root") || "";
    return new URL(rootAttr + "_static/" + file, window.location.href).href;
  }

  function getWorker() {
    if (worker || workerProblem) return worker;
    try {
      worker = new Worker(staticUrl("andrea_attention_worker.js"));
      worker.onmessage = function (e) {
        var cb = callbacks[e.data.id];
        delete callbacks[e.data.id];
        if (cb) cb(e.data);
      };
      worker.onerror = function (e) {
        workerProblem = "the viewer's model did not start (" + (e.message || "a Web Worker error") + ")";
        Object.keys(callbacks).forEach(function (id) { callbacks[id]({error: workerProblem}); delete callbacks[id]; });
        e.preventDefault();
      };
    } catch (e) {
      workerProblem = window.location.protocol === "file:"
        ? "the viewer computes in a background thread, which needs the site served over http (make serve), not opened as a file"
        : "this browser could not start a Web Worker (" + e.message + ")";
    }
    return worker;
  }

  function request(msg, done) {
    var w = getWorker();
    if (!w) { done({error: workerProblem}); return; }
    var id = nextId++;
    callbacks[id] = done;
    msg.id = id;
    w.postMessage(msg);
  }

  var SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function html(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* A sequential colour scale (ColorBrewer Blues): 0 near white, 1 dark blue, on the viewer's white card. */
  var STOPS = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214],
               [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107]];
  function colour(v) {
    if (typeof v !== "number" || isNaN(v)) fail("a heatmap cell's weight must be a number from 0 to 1, got " + shown(v));
    v = Math.min(1, Math.max(0, v)) * (STOPS.length - 1);
    var i = Math.min(STOPS.length - 2, Math.floor(v)), f = v - i, a = STOPS[i], b = STOPS[i + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + f * (b[c] - a[c])); }).join(",") + ")";
  }

  var LABEL_PX = 11, CHAR_PX = 6.7;  // the labels' font size, and a monospace character's width at that size
  function labelWidth(s) {  // in character widths: CJK and emoji take two
    var w = 0;
    Array.from(s).forEach(function (ch) { w += ch.codePointAt(0) >= 0x1100 ? 2 : 1; });
    return w;
  }
  function truncate(s, chars) {
    if (labelWidth(s) <= chars) return s;
    var out = "", w = 0;
    Array.from(s).some(function (ch) {
      var cw = ch.codePointAt(0) >= 0x1100 ? 2 : 1;
      if (w + cw > chars - 1) return true;
      out += ch; w += cw; return false;
    });
    return out + "…";
  }

  /* The heatmap of one head, drawn at the box's own width (no sideways scrolling): labels at 11 px,
   * every k-th token labelled when the cells are smaller than a line of text. */
  function heatmap(box, tokens, map, idBase) {
    var T = tokens.length, W = Math.max(200, Math.floor(box.clientWidth || 600));
    var longest = tokens.reduce(function (m, t) { return Math.max(m, labelWidth(t.text)); }, 1);
    var chars = Math.max(4, Math.min(longest, Math.floor((0.28 * W - 10) / CHAR_PX), 14));
    var L = Math.ceil(chars * CHAR_PX) + 10;  // room for the labels, left and top
    var cell = Math.max(2, Math.min(30, Math.floor((W - L - 4) / T)));
    var grid = cell * T, step = Math.ceil((LABEL_PX + 2) / cell), legendH = 58;
    var width = Math.min(W, L + grid + 4), height = L + grid + legendH;
    var s = svg("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height,
                        class: "andrea-attention-svg", "font-size": LABEL_PX});
    var gradId = idBase + "-scale";
    var defs = svg("defs"), grad = svg("linearGradient", {id: gradId, x1: "0", x2: "1", y1: "0", y2: "0"});
    STOPS.forEach(function (c, i) { grad.appendChild(svg("stop", {offset: (i / (STOPS.length - 1)).toFixed(3), "stop-color": colour(i / (STOPS.length - 1))})); });
    defs.appendChild(grad);
    s.appendChild(defs);
    var g = svg("g", {transform: "translate(" + L + "," + L + ")"});
    g.appendChild(svg("rect", {x: 0, y: 0, width: grid, height: grid, fill: "#e6e6e6", class: "andrea-attention-masked"}));
    for (var q = 0; q < T; q++) {
      for (var k = 0; k <= q; k++) {
        var v = map[q * T + k];
        var r = svg("rect", {x: k * cell, y: q * cell, width: cell, height: cell, fill: colour(v),
                             "data-q": q, "data-k": k, "data-w": v.toPrecision(6)});
        r.appendChild(svg("title", {}, "query " + (q + 1) + " " + tokens[q].text + " → key " + (k + 1) + " " +
                          tokens[k].text + ": " + v.toFixed(3)));
        g.appendChild(r);
      }
    }
    g.appendChild(svg("path", {d: "M0,0 L" + grid + "," + grid, stroke: "#999", "stroke-width": 0.5, fill: "none"}));
    s.appendChild(g);
    var font = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace";
    for (var t = 0; t < T; t++) {
      if (t % step) continue;
      var label = truncate(tokens[t].text, chars), mid = L + t * cell + cell / 2;
      var left = svg("text", {x: L - 4, y: mid, "text-anchor": "end", "dominant-baseline": "central",
                              "font-family": font, class: "andrea-attention-qlabel", "data-t": t}, label);
      var tip = svg("g");  // a tooltip with the whole token (the label may be cut short)
      tip.appendChild(svg("title", {}, "token " + (t + 1) + ": " + tokens[t].text));
      tip.appendChild(left);
      s.appendChild(tip);
      var top = svg("text", {x: 0, y: 0, transform: "translate(" + mid + "," + (L - 4) + ") rotate(-90)",
                             "text-anchor": "start", "dominant-baseline": "central", "font-family": font,
                             class: "andrea-attention-klabel", "data-t": t}, label);
      s.appendChild(top);
    }
    s.appendChild(svg("text", {x: 2, y: LABEL_PX, class: "andrea-attention-axis", "font-size": 10},
                      "query ↓  key →"));
    var ly = L + grid + 14, lw = Math.min(200, Math.max(120, grid)), lx = Math.max(2, Math.min(L, width - lw - 60));
    s.appendChild(svg("text", {x: lx, y: ly, class: "andrea-attention-legend-title"}, "attention weight (each row sums to 1)"));
    s.appendChild(svg("rect", {x: lx, y: ly + 6, width: lw, height: 10, fill: "url(#" + gradId + ")", stroke: "#888", "stroke-width": 0.5}));
    [0, 0.5, 1].forEach(function (v) {
      s.appendChild(svg("text", {x: lx + v * lw, y: ly + 30, "text-anchor": v === 0 ? "start" : v === 1 ? "end" : "middle"}, String(v)));
    });
    var mx = lx + lw + 10;
    if (mx + 60 <= width) {  // "unseen" needs about 55 px at 11 px
      s.appendChild(svg("rect", {x: mx, y: ly + 6, width: 10, height: 10, fill: "#e6e6e6", stroke: "#888", "stroke-width": 0.5}));
      s.appendChild(svg("text", {x: mx + 14, y: ly + 15}, "unseen"));
    }
    box.textContent = "";
    box.appendChild(s);
    return {cell: cell, step: step, labels: chars};
  }

  var LOOK = {
    trained: "What to look for: heads that put most of each row on one token — the token just before " +
      "(the cells just left of the diagonal), the first token, or an earlier copy of the same word — and how " +
      "they differ from block to block. Switch to the untrained model to see what training added.",
    untrained: "What to look for: with random weights every row is spread almost evenly — about 1/(t+1) on " +
      "each of the t+1 tokens a query sees — in every block and head. Nothing has been learnt yet; " +
      "switch to the trained model to compare.",
  };
  var WHO = {
    trained: "the trained ANDREA (the book's shipped weights, trained on Python's manuals)",
    untrained: "an untrained ANDREA (the same shape, GPT-2's random initialisation, seed 0)",
  };

  /* mount(el, opts): the viewer in `el`. opts: {text, model: "trained"|"untrained", block: 1.., head: 1..}.
   * Problems (a bad option, an empty or too long text, a model that did not load) are shown in the viewer. */
  function mount(el, opts) {
    opts = opts || {};
    var idBase = el.id || ("andrea-attention-" + nextId++);
    el.classList.add("andrea-attention");
    el.textContent = "";
    var controls = html("div", {class: "andrea-attention-controls"});
    var textLabel = html("label", {class: "andrea-attention-textlabel"}, "Your text ");
    var input = html("textarea", {name: "text", rows: "2", spellcheck: "false", class: "andrea-attention-text",
                                  "aria-label": "the text whose attention is shown (at most " + MAX_TOKENS + " tokens)"});
    input.value = typeof opts.text === "string" ? opts.text : "The cat sat on the mat because it was tired, and then it slept.";
    textLabel.appendChild(input);
    function select(name, label, options) {
      var lab = html("label", {class: "andrea-attention-choice"}, label + " ");
      var sel = html("select", {name: name});
      options.forEach(function (o) { sel.appendChild(html("option", {value: String(o[0])}, o[1])); });
      lab.appendChild(sel);
      controls.appendChild(lab);
      return sel;
    }
    controls.appendChild(textLabel);
    var modelSel = select("model", "model", [["trained", "trained"], ["untrained", "untrained"]]);
    var blockSel = select("block", "block", []), headSel = select("head", "head", []);
    var figure = html("div", {class: "andrea-attention-map", role: "img"});
    var look = html("p", {class: "andrea-attention-look", "aria-live": "polite"});
    el.appendChild(controls);
    el.appendChild(figure);
    // A cell's or a label's tokens, for a tap (a touch screen shows no hover tooltip) or a click.
    var picked = html("p", {class: "andrea-attention-picked", "aria-live": "polite"});
    el.appendChild(picked);
    figure.addEventListener("click", function (e) {
      var node = e.target.closest ? e.target.closest("rect[data-q], g") : null;
      var title = node && node.querySelector(":scope > title");
      picked.textContent = title ? title.textContent : "";
    });
    el.appendChild(look);

    var state = {model: opts.model === undefined ? "trained" : opts.model, block: opts.block === undefined ? 1 : opts.block,
                 head: opts.head === undefined ? 1 : opts.head, result: null, loaded: false, latest: 0, timer: null, cache: {}};
    function setState(s) { el.setAttribute("data-state", s); }
    function showError(msg) {
      setState("error");
      state.result = null;  // block and head choices draw nothing until a text is drawn again
      figure.classList.remove("andrea-computing");
      figure.textContent = "";
      figure.setAttribute("aria-label", "no heatmap: " + msg);
      look.textContent = msg;
      look.className = "andrea-attention-look andrea-attention-error";
    }
    function fillIndex(sel, n, value) {
      sel.textContent = "";
      for (var i = 1; i <= n; i++) sel.appendChild(html("option", {value: String(i)}, String(i)));
      sel.value = String(value);
    }

    function draw() {
      var r = state.result;
      if (!r) return;
      var map;
      try {
        checkIndex("block", state.block, r.n_layer);
        checkIndex("head", state.head, r.n_head);
        map = headMap(r, state.block, state.head);
        var geo = heatmap(figure, r.tokens, map, idBase);
      } catch (e) { showError(e.message); return; }
      var T = r.T, ent = normalisedEntropy(map, T), st = strongest(map, T);
      figure.setAttribute("aria-label", "Heatmap of block " + state.block + ", head " + state.head + "'s attention weights over " +
                          T + " tokens, " + (r.model === "trained" ? "trained" : "untrained") + " model");
      var what = "Block " + state.block + ", head " + state.head + " of " + WHO[r.model] + ", on your " + T + " token" +
        (T === 1 ? "" : "s") + (geo.step > 1 ? " (one in " + geo.step + " labelled; " + POINT + " a cell for its tokens)" : "") +
        ". Row t is token t (the query) sharing its attention among itself and the tokens before it (the keys): " +
        "each row sums to 1, and nothing lies above the diagonal, since a token never sees the ones after it. ";
      var stats = T > 1 ? "This head: evenness " + ent.toFixed(2) + " (1 = spread evenly over the visible tokens); " +
        "its strongest weight is on the previous token in " + st.previous + " of " + st.rows + " rows, on the first token in " +
        st.first + ". " : "";
      look.className = "andrea-attention-look";
      look.textContent = "";
      look.appendChild(document.createTextNode(what + stats));
      look.appendChild(html("strong", {}, LOOK[r.model].split(":")[0] + ":"));
      look.appendChild(document.createTextNode(LOOK[r.model].slice(LOOK[r.model].indexOf(":") + 1) +
        " (Computed in this page in " + Math.round(r.ms) + " ms, in a background thread.)"));
      el.setAttribute("data-block", state.block);
      el.setAttribute("data-head", state.head);
      el.setAttribute("data-model", r.model);
      el.setAttribute("data-tokens", T);
      el.setAttribute("data-ms", r.ms.toFixed(1));
      setState("drawn");
    }

    function compute() {
      var text = input.value, model = state.model, key = model + "\u0000" + text;
      if (MODELS.indexOf(model) < 0) { showError("model must be \"trained\" or \"untrained\", got " + shown(model)); return; }
      figure.classList.remove("andrea-computing");
      if (text.trim() === "") { state.latest = nextId; showError("The text is empty: type a sentence (1 to " + MAX_TOKENS + " tokens)."); return; }
      if (state.cache[key]) { state.latest = nextId; state.result = el.andreaAttention = state.cache[key]; draw(); return; }
      setState(state.loaded ? "computing" : "loading");
      if (state.loaded) figure.classList.add("andrea-computing");
      else look.textContent = "Loading the model (the trained weights are 14 MB, fetched once)…";
      var sent = nextId;
      state.latest = sent;
      request({text: text, model: model}, function (msg) {
        if (sent !== state.latest || msg.superseded) return;  // a newer request wins
        figure.classList.remove("andrea-computing");
        if (msg.error) { showError(msg.error); return; }
        var r = {tokens: msg.tokens, T: msg.T, n_layer: msg.n_layer, n_head: msg.n_head, maps: msg.maps,
                 model: msg.model, ms: msg.ms, loadMs: msg.loadMs};
        var keys = Object.keys(state.cache);
        if (keys.length >= 6) delete state.cache[keys[0]];
        state.cache[key] = r;
        state.result = r;
        state.loaded = true;
        el.andreaAttention = r;  // for the tests: what the heatmap was drawn from
        if (blockSel.options.length !== r.n_layer) fillIndex(blockSel, r.n_layer, state.block);
        if (headSel.options.length !== r.n_head) fillIndex(headSel, r.n_head, state.head);
        draw();
      });
    }

    fillIndex(blockSel, 12, state.block);
    fillIndex(headSel, 6, state.head);
    modelSel.value = state.model;
    input.addEventListener("input", function () {  // computed when the typing pauses (a quarter second)
      clearTimeout(state.timer);
      setState("computing");
      figure.classList.add("andrea-computing");
      state.timer = setTimeout(compute, 250);
    });
    modelSel.addEventListener("change", function () { state.model = modelSel.value; compute(); });
    blockSel.addEventListener("change", function () { state.block = Number(blockSel.value); draw(); });
    headSel.addEventListener("change", function () { state.head = Number(headSel.value); draw(); });
    var lastWidth = 0;
    if (typeof ResizeObserver !== "undefined") {
      new ResizeObserver(function () {
        var w = Math.floor(figure.clientWidth);
        if (w && w !== lastWidth && state.result && el.getAttribute("data-state") === "drawn") { lastWidth = w; draw(); }
      }).observe(figure);
    }
    el.setAttribute("data-ready", "1");
    try {  // the options the page was written with, checked as the Python side checks them
      if (MODELS.indexOf(state.model) < 0) fail("model must be \"trained\" or \"untrained\", got " + shown(state.model));
      checkIndex("block", state.block, 12);
      checkIndex("head", state.head, 6);
    } catch (e) { showError(e.message); return; }
    compute();
  }

  var api = {
    MAX_TOKENS: MAX_TOKENS, MODELS: MODELS,
    tokenizer: tokenizer, prepare: prepare, displayText: displayText,
    readSafetensors: readSafetensors, weightsOf: weightsOf, checkConfig: checkConfig, shapes: shapes,
    untrainedWeights: untrainedWeights, attend: attend, headMap: headMap,
    normalisedEntropy: normalisedEntropy, strongest: strongest, colour: colour, mount: mount,
  };
  root.AndreaAttention = api;
  if (typeof module === "object" && module.exports) module.exports = api;
})(typeof self !== "undefined" ? self : typeof globalThis !== "undefined" ? globalThis : this);
