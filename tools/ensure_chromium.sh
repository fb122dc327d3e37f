#!/usr/bin/env bash
# Make sure Debian's chromium is there for the browser tests; install it when we are root.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing chromium from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "NOTE: /usr/bin/chromium is missing, so the browser tests will be skipped."
echo "      Install it with: sudo apt-get install chromium"
