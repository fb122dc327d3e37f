# ANDREA book. Every target sets up what it needs (the .venv, the vendored JavaScript) by itself.
#   make book    set up and build the book into _build/html (warnings are errors)
#   make test    set up, check style and types, build the book, run every test (package, widgets,
#                chapters, the site in Chromium, the labs in JupyterLab, the stored results), two at a
#                time (TEST_WORKERS=1 for one)
#   make lab     set up and open the labs in JupyterLab
#   make bench   set up and print the benchmark tables
#   make experiments  set up and (re)run the training grids whose stored results are missing or stale, and
#                retrain chapter 8's model when its code changed (its text ships in andrea/texts)
#   make experiments-second-cpu  set up and train the emulated second CPU's copies of the deciding runs
#                that have none (the verdicts are read on both machines)
#   make gpu-check    set up and check every CUDA path (on a machine with a GPU; skips cleanly without one);
#                the benchmark against torch's modules is a second run: tools/gpu_check.py --only bench
#   make gpu-wheels   download the wheels the lent GPU machine lacks into .whl/ (carried there)
#   make gpu-check-device  the GPU check on the lent GPU machine as it is (no network, no venv: README)
#   make gpu-rehearse set up and rehearse gpu-check-device on the CPU, in a venv of the device's packages
#   make check-portable  set up, run every page as another CPU would (torch's portable kernels, 1 thread;
#                THREADS=2 for two) and compare what it says with this machine's native run; prints the table
#   make serve   serve the built site on http://localhost:8000
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
VENDOR := book/_static/vendor/.stamp
export ANDREA_CACHE ?= $(CURDIR)/.cache/andrea

.PHONY: setup book test lab bench serve clean vendor chromium experiments experiments-second-cpu gpu-check gpu-wheels gpu-check-device gpu-rehearse check-portable

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml tools/jupyterlab-overrides.json
	@echo "== setting up $(VENV) (Python packages from requirements.txt)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (andrea)" >/dev/null
	@mkdir -p $(VENV)/share/jupyter/lab/settings && cp tools/jupyterlab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

vendor: $(VENDOR)

$(VENDOR): tools/vendor_js.py | $(STAMP)
	$(PY) tools/vendor_js.py

chromium:
	@bash tools/ensure_chromium.sh

book: $(STAMP) $(VENDOR)
	@bash tools/build_book.sh

test: $(STAMP) $(VENDOR) chromium
	@echo "== style and types (ruff, mypy)"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	@bash tools/build_book.sh
	$(PY) -m pytest -n $(or $(TEST_WORKERS),2) --dist loadscope --no-loadscope-reorder

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --config=tools/jupyter_lab_config.py notebooks/

bench: $(STAMP) $(VENDOR) chromium
	$(PY) -m andrea.views.bench
	$(PY) tools/labui.py --bench
	$(PY) tools/pagemodel.py --bench

check-portable: $(STAMP)
	$(PY) tools/portable.py --against native --threads $(or $(THREADS),1)

experiments: $(STAMP)
	$(PY) -m andrea.experiments

experiments-second-cpu: $(STAMP)
	$(PY) -m andrea.experiments --second-cpu

gpu-check: $(STAMP)
	$(PY) tools/gpu_check.py

# The lent GPU machine has no network and its own python3 and torch: the check runs there without make's
# setup, with the wheels of .whl/ (see README, "On a GPU"). gpu-rehearse runs the same command here.
gpu-wheels: $(STAMP)
	$(PY) tools/gpu_wheels.py download

gpu-check-device:
	bash tools/gpu_device.sh

gpu-rehearse: $(STAMP)
	$(PY) tools/gpu_wheels.py rehearse

serve:
	@test -f _build/html/index.html || { echo "No built book: run 'make book' first."; exit 1; }
	@echo "Serving _build/html on http://localhost:8000 (Ctrl-C to stop)"
	$(PYTHON) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

clean:
	rm -rf _build book/_static/vendor
