/* The explorer's Web Worker: measures settings with andrea_flow.js off the page's main thread.
 * In: {id, setting}. Out: {id, result} (result.backend, result.ms added) or {id, error}. */
importScripts("vendor/tfjs/tf.min.js", "vendor/tfjs/tf-backend-wasm.min.js", "andrea_flow.js");

var backend = AndreaFlow.startBackend();

self.onmessage = async function (e) {
  var name = await backend;
  var t0 = performance.now();
  try {
    var r = AndreaFlow.measure(e.data.setting);
    r.backend = name;
    r.ms = performance.now() - t0;
    r.version = tf.version_core;
    self.postMessage({id: e.data.id, result: r});
  } catch (err) {
    self.postMessage({id: e.data.id, error: String((err && err.message) || err)});
  }
};
