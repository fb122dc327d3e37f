# ANDREA book. Every target sets up what it needs (the .venv, the vendored JavaScript) by itself.
#   make book    set up and build the book into _build/html (warnings are errors)
#   make test    set up, build the book, and run every test (package, widgets, chapters, site)
#   make lab     set up and open the labs in JupyterLab
#   make bench   set up and print the benchmark tables
#   make serve   serve the built site on http://localhost:8000
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
VENDOR := book/_static/vendor/.stamp
export ANDREA_CACHE ?= $(CURDIR)/.cache/andrea

.PHONY: setup book test lab bench serve clean vendor chromium

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@echo "== setting up $(VENV) (Python packages from requirements.txt)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (andrea)" >/dev/null
	@touch $@

vendor: $(VENDOR)

$(VENDOR): tools/vendor_js.py | $(STAMP)
	$(PY) tools/vendor_js.py

chromium:
	@bash tools/ensure_chromium.sh

book: $(STAMP) $(VENDOR)
	@bash tools/build_book.sh

test: $(STAMP) $(VENDOR) chromium
	@bash tools/build_book.sh
	$(PY) -m pytest

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

bench: $(STAMP)
	$(PY) -m andrea.bench

serve:
	@test -f _build/html/index.html || { echo "No built book: run 'make book' first."; exit 1; }
	@echo "Serving _build/html on http://localhost:8000 (Ctrl-C to stop)"
	$(PYTHON) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

clean:
	rm -rf _build book/_static/vendor
