"""Bring the site's JavaScript in from npm at build time, so the published book needs no CDN.

Fetches pinned packages with ``npm pack`` (the registry only, no install scripts run) and copies
the few files the site serves into book/_static/vendor/ (ignored by git):
  mathjax/        MathJax 3 (tex-chtml and what it loads: fonts, TeX extensions, menu)
  vega*.min.js    Vega, Vega-Lite and vega-embed, which draw the static gradient-flow explorer
  tfjs/           TensorFlow.js (Apache-2.0) and its WebAssembly backend, on which the explorer's model
                  runs in the page (book/_static/andrea_flow.js, in a Web Worker: andrea_worker.js)
The versions match the Vega-Lite schema that Altair writes (checked in tests). Each tarball, fetched or
cached, must have the SHA-256 pinned in ``SHA256`` (checked against the npm registry's own sha512
integrity when pinned): a cached tarball is never trusted by its name alone.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
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
SHA256 = {  # package -> the SHA-256 of its npm tarball (its sha512 matched the registry's dist.integrity)
    "vega": "aa98ba8c2141f60123e98cdac229303450b1401e5c20f4434a18431e9a9a344d",
    "vega-lite": "7226845c140626b2bf2dae3dd7372d6e2dbdf65380d857c70da8e487ca6cf15e",
    "vega-embed": "a4db01011ad87ed847b83c3b47538f08145ec269bb3c2bff8e35ff692e0f0d58",
    "mathjax": "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09",
    "@tensorflow/tfjs": "56505c191e24116787477b3bb5bb1cc0cf1c2bdce8112b9c402a8a2d31cf2f00",
    "@tensorflow/tfjs-backend-wasm": "5cd6f5e18657c12fb94f4ec3dcef485c8c1a9ca39f3ef1d261c1cb13c1a231c3",
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


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checked(name: str, version: str, tgz: Path, fetched: bool) -> Path:
    """``tgz`` if it has the pinned SHA-256 of ``name``'s tarball; else stop, naming the file and both
    hashes (a tarball just fetched that does not match is deleted: the registry served another file)."""
    got, pinned = sha256(tgz), SHA256[name]
    if got == pinned:
        return tgz
    rel = tgz.relative_to(ROOT) if tgz.is_relative_to(ROOT) else tgz
    if fetched:
        tgz.unlink()
        sys.exit(
            f"vendor_js: npm served a tarball for {name}@{version} with SHA-256 {got[:16]}..., not the pinned "
            f"{pinned[:16]}...: refused and deleted; check the registry, or pin the new hash in tools/vendor_js.py "
            f"after checking it against 'npm view {name}@{version} dist.integrity'"
        )
    sys.exit(
        f"vendor_js: the cached tarball {rel} has SHA-256 {got[:16]}..., not the pinned {pinned[:16]}... for "
        f"{name}@{version}: it was altered or damaged (truncated?); delete it (rm {rel}) and run again to fetch it"
    )


def fetch(name: str, version: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    tgz = CACHE / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"  # npm pack's own file name
    if tgz.exists():
        return checked(name, version, tgz, fetched=False)
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
    return checked(name, version, tgz, fetched=True)


def unpack(name: str, tgz: Path, tmp_dest: Path) -> None:
    """Copy ``FILES[name]`` out of ``tgz`` into ``tmp_dest``; a tarball that cannot be read is named."""
    try:
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
                    data = tar.extractfile(m)
                    if data is None:
                        raise tarfile.ReadError(f"{m.name} has no data")
                    out.write_bytes(data.read())
    except (tarfile.TarError, EOFError, zlib.error) as e:
        sys.exit(
            f"vendor_js: the tarball {tgz} cannot be read ({type(e).__name__}: {e}): it is damaged or truncated; "
            f"delete it and run again to fetch it"
        )


def main() -> None:
    print("== vendoring the site's JavaScript into", DEST.relative_to(ROOT))
    tmp_dest = Path(tempfile.mkdtemp(dir=DEST.parent if DEST.parent.exists() else None))
    try:
        for name, version in PACKAGES.items():
            unpack(name, fetch(name, version), tmp_dest)
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
