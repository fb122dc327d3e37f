#!/usr/bin/env bash
# Build the book with warnings as errors; keep the log; print where the index page is.
# Notebook outputs are cached in _build/.jupyter_cache (an unchanged rebuild takes seconds); the cache is
# dropped whenever the andrea package or its stored results change, since a chapter's outputs depend on them.
# At the end the chapters' Colab copies are written from the executed notebooks (tools/make_colab.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export ANDREA_CACHE="${ANDREA_CACHE:-$PWD/.cache/andrea}"   # tokenizer, experiment results, explorer grid
export ANDREA_BOOK_BUILD=1   # no progress bars in the executed pages
mkdir -p _build
hash=$(find andrea -type f \( -name '*.py' -o -path 'andrea/results/*' \) -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
if [ "$(cat _build/.andrea-hash 2>/dev/null)" != "$hash" ]; then
  rm -rf _build/.jupyter_cache _build/html _build/jupyter_execute _build/.doctrees
  echo "$hash" > _build/.andrea-hash
fi
# Sphinx copies book/_static only when some page is rewritten: a changed stylesheet or script rewrites them all
# (from the execution cache, so nothing is re-run).
all=()
statics=$(cat book/_static/*.css book/_static/*.js book/_ext/*.py 2>/dev/null | sha256sum | cut -c1-16)
if [ "$(cat _build/.static-hash 2>/dev/null)" != "$statics" ]; then all=(--all); fi
start=$(date +%s)
rm -f _build/book-build.ok
set -o pipefail
# The pages not cached yet are executed first, as many at a time as there are cores, one torch thread
# each (tools/execute_pages.py); jupyter-book then reads them from the cache.
.venv/bin/python tools/execute_pages.py 2>&1 | tee _build/execute-pages.log
.venv/bin/jupyter-book build . --builder html -n -W --keep-going "${all[@]}" 2>&1 | tee _build/book-build.log
echo "$statics" > _build/.static-hash
.venv/bin/python tools/make_colab.py > /dev/null
echo "$(( $(date +%s) - start ))" > _build/book-build.ok
echo "Built in $(cat _build/book-build.ok) s. Open: file://$PWD/_build/html/index.html"
