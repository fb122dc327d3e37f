# JupyterLab settings for `make lab` and the JupyterLab test (tests/test_lab_ui.py).
# Loaded with `jupyter lab --config=tools/jupyter_lab_config.py`.
import os

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

# Containers, Binder-like images and CI run as root: allow it there (and only there).
if hasattr(os, "geteuid") and os.geteuid() == 0:
    c.ServerApp.allow_root = True

WIDGET = "application/vnd.jupyter.widget-view+json"
NOTE = "(An interactive widget: run this cell to start it again. Widgets need a running kernel.)"


def widgets_to_notes(model, **kwargs):
    """Before a notebook is saved, replace each live widget's output with a note.

    A saved widget output points at a widget model that only exists while its kernel runs; reopened
    later, JupyterLab would show "Error displaying widget: model not found". The note says what to
    do instead. The explorer's own note (its text/plain) is kept when it has one.
    """
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    nb = model["content"]
    nb.get("metadata", {}).pop("widgets", None)  # saved widget state: useless without the kernel
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data") or {}
            if WIDGET in data:
                text = data.get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                note = text if "run this cell" in text.lower() else NOTE
                out["data"] = {"text/plain": note}


c.FileContentsManager.pre_save_hook = widgets_to_notes
