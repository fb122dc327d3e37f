"""Bring the site's JavaScript in from npm at build time, so the published book needs no CDN.

Fetches pinned packages with ``npm pack`` (the registry only, no install scripts run) and copies
the few files the site serves into book/_static/vendor/ (ignored by git):
  mathjax/        MathJax 3 (tex-chtml and what it loads: fonts, TeX extensions, menu)
  vega*.min.js    Vega, Vega-Lite and vega-embed, which draw the static gradient-flow explorer
  tfjs/           TensorFlow.js (Apache-2.0) and its WebAssembly backend, on which the explorer's model
                  runs in the page (book/_static/andrea_flow.js, in a Web Worker: andrea_worker.js)
The versions match the Vega-Lite schema that Altair writes (checked in tests).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "book" / "_static" / "vendor"
CACHE = ROOT / ".cache" / "npm"

PACKAGES = {  # package -> version (keep vega-lite's major in step with altair.SCHEMA_VERSION)
    "vega": "6.2.0",
    "vega-lite": "6.4.1",
    "vega-embed": "7.1.0",
    "mathjax": "3.2.2",
    "@tensorflow/tfjs": "4.22.0",  # the union bundle: tf-core alone registers no gradients
    "@tensorflow/tfjs-backend-wasm": "4.22.0",
}
FILES = {  # package -> [(path inside the tarball, destination under DEST)]
    "vega": [("package/build/vega.min.js", "vega.min.js")],
    "vega-lite": [("package/build/vega-lite.min.js", "vega-lite.min.js")],
    "vega-embed": [("package/build/vega-embed.min.js", "vega-embed.min.js")],
    "mathjax": [("package/es5/", "mathjax/")],
    "@tensorflow/tfjs": [("package/dist/tf.min.js", "tfjs/tf.min.js")],
    "@tensorflow/tfjs-backend-wasm": [  # the threaded build needs cross-origin isolation, which a static host lacks
        ("package/dist/tf-backend-wasm.min.js", "tfjs/tf-backend-wasm.min.js"),
        ("package/dist/tfjs-backend-wasm-simd.wasm", "tfjs/tfjs-backend-wasm-simd.wasm"),
        ("package/dist/tfjs-backend-wasm.wasm", "tfjs/tfjs-backend-wasm.wasm"),
    ],
}
MATHJAX_SKIP = (
    "output/svg",
    "input/asciimath",
    "input/mml",
    "mml-",
    "tex-svg",
    "tex-mml",
    "tex-chtml-full",
    "tex-svg-full",
)


def fetch(name: str, version: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    tgz = CACHE / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"  # npm pack's own file name
    if not tgz.exists():
        print(f"  npm pack {name}@{version}")
        try:
            subprocess.run(
                ["npm", "pack", f"{name}@{version}", "--silent", "--pack-destination", str(CACHE)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            sys.exit("vendor_js: npm is not installed; install Node.js (Debian: apt-get install npm)")
        except subprocess.CalledProcessError as e:
            sys.exit(f"vendor_js: 'npm pack {name}@{version}' failed ({e.returncode}); is the npm registry reachable?")
    return tgz


def main() -> None:
    print("== vendoring the site's JavaScript into", DEST.relative_to(ROOT))
    tmp_dest = Path(tempfile.mkdtemp(dir=DEST.parent if DEST.parent.exists() else None))
    try:
        for name, version in PACKAGES.items():
            tgz = fetch(name, version)
            with tarfile.open(tgz) as tar:
                members = tar.getmembers()
                for src, dst in FILES[name]:
                    for m in members:
                        is_dir = src.endswith("/")
                        if not m.isfile() or not (m.name.startswith(src) if is_dir else m.name == src):
                            continue
                        rel = m.name[len(src) :]
                        if name == "mathjax" and (any(s in rel for s in MATHJAX_SKIP) or rel.endswith(".map")):
                            continue
                        out = tmp_dest / (dst + rel if src.endswith("/") else dst)
                        out.parent.mkdir(parents=True, exist_ok=True)
                        out.write_bytes(tar.extractfile(m).read())
        (tmp_dest / "VERSIONS.txt").write_text("".join(f"{k} {v}\n" for k, v in PACKAGES.items()))
        (tmp_dest / ".stamp").write_text("ok\n")
        shutil.rmtree(DEST, ignore_errors=True)
        tmp_dest.rename(DEST)
    finally:
        shutil.rmtree(tmp_dest, ignore_errors=True)
    size = sum(p.stat().st_size for p in DEST.rglob("*") if p.is_file())
    print(f"  {size / 1e6:.1f} MB in {DEST.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
