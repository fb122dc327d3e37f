/* The training panel's Web Worker: trains runs with andrea_train.js off the page's main thread.
 *
 * In:  {type: "train", id, corpus (URL of the byte corpus), runs: [{name, model, train}]} (model.seed
 *        seeds both the initial weights and the batches)
 *        starts the runs (a newer "train" replaces any run in progress: the newest request wins);
 *      {type: "stop", id} pauses them between two steps; {type: "resume", id} goes on;
 *      {type: "reset", id} drops them.
 * Out: {id, type: "ready", backend, unigram}; {id, type: "step", name, step, loss, lr, lambda}
 *      (lambda: the mean |λ| of each block's LayerScale, when it has one); {id, type: "done", name};
 *      {id, type: "diverged", name, step}; {id, type: "stopped"}; {id, type: "reset"};
 *      {id, type: "error", error} (a bad setting, named). */
importScripts("vendor/tfjs/tf.min.js", "vendor/tfjs/tf-backend-wasm.min.js", "andrea_flow.js", "andrea_train.js");

var backend = AndreaFlow.startBackend();

var corpora = {}, job = null;

async function corpus(url) {
  if (!corpora[url]) {
    var r = await fetch(url);
    if (!r.ok) throw new Error("could not load the training text " + url + " (" + r.status + ")");
    corpora[url] = new Uint8Array(await r.arrayBuffer());
  }
  return corpora[url];
}

function drop() {
  if (job) job.runs.forEach(function (r) { r.trainer.dispose(); });
  job = null;
}

function lambdas(run) {
  if (run.trainer.model.layerscale === null) return null;
  var w = run.trainer.read("weights"), out = [];
  for (var i = 0; i < run.trainer.model.depth; i++) {
    var a = w["blocks." + i + ".ls_1.scale"], b = w["blocks." + i + ".ls_2.scale"], s = 0;
    for (var k = 0; k < a.length; k++) s += Math.abs(a[k]) + Math.abs(b[k]);
    out.push(s / (a.length + b.length));
  }
  return out;
}

function tick(current) {
  if (job !== current || job.paused) return;
  var left = job.runs.filter(function (r) { return !r.finished; });
  if (!left.length) { job = null; return; }
  left.forEach(function (run) {
    var out = run.trainer.step(run.next());
    if (!out.finite) {
      run.finished = true;
      self.postMessage({id: current.id, type: "diverged", name: run.name, step: out.step + 1});
      return;
    }
    var msg = {id: current.id, type: "step", name: run.name, step: out.step, loss: out.loss, lr: out.lr};
    if (out.step % 10 === 0 || out.step === run.trainer.train.steps) msg.lambda = lambdas(run);
    self.postMessage(msg);
    if (out.step === run.trainer.train.steps) {
      run.finished = true;
      self.postMessage({id: current.id, type: "done", name: run.name});
    }
  });
  setTimeout(function () { tick(current); }, 0);  // between two steps, a newer message is read
}

self.onmessage = async function (e) {
  var msg = e.data;
  try {
    if (msg.type === "stop") {
      if (job) job.paused = true;
      self.postMessage({id: msg.id, type: "stopped"});
    } else if (msg.type === "resume") {
      if (job && job.paused) { job.paused = false; tick(job); }
    } else if (msg.type === "reset") {
      drop();
      self.postMessage({id: msg.id, type: "reset"});
    } else if (msg.type === "train") {
      drop();
      var mine = {id: msg.id, runs: [], paused: false};
      job = mine;
      var name = await backend, bytes = await corpus(msg.corpus);
      if (job !== mine) return;  // a newer request arrived meanwhile
      msg.runs.forEach(function (r) {  // each made run is kept in the job at once, so drop() frees it
        var trainer;
        try { trainer = AndreaTrain.Trainer(r.model, null, r.train); }
        catch (err) { throw new Error("run " + r.name + ": " + err.message); }
        mine.runs.push({name: r.name, trainer: trainer, finished: false,
                        next: AndreaTrain.sampler(bytes, trainer.model.seed, trainer.train.batchSize, trainer.train.seqLen)});
      });
      self.postMessage({id: msg.id, type: "ready", backend: name, unigram: AndreaTrain.unigramEntropy(bytes)});
      tick(mine);
    } else throw new Error("unknown message type " + JSON.stringify(msg.type));
  } catch (err) {
    if (job && job.id === msg.id) drop();
    self.postMessage({id: msg.id, type: "error", error: String((err && err.message) || err)});
  }
};
