#!/usr/bin/env bash
# Make sure Python's manuals (Debian's python3.11-doc) are there for the trained model's corpus;
# install them when we are root. Only retraining (make experiments) and its first-steps test need them:
# the book builds from the shipped weights and evaluation set.
set -euo pipefail
if [ -d "${ANDREA_DOCS:-/usr/share/doc/python3.11/html/_sources}" ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing python3.11-doc (Python's manuals, PSF License) from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11-doc >/dev/null
  exit 0
fi
echo "NOTE: Python's manuals (Debian's python3.11-doc) are missing, so the trained model's first-steps test"
echo "      will be skipped and make experiments cannot retrain it. Install them with:"
echo "      sudo apt-get install python3.11-doc   (or set ANDREA_DOCS to a copy of its html/_sources folder)"
