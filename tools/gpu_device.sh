#!/usr/bin/env bash
# The GPU check on the lent GPU machine as that machine is: its own python3 and torch, no network, no venv,
# no install step beyond the carried wheels (`make gpu-wheels` downloads them into .whl/ beforehand).
#
#   bash tools/gpu_device.sh [gpu_check.py options]      # on the device: carry [".whl"], timeout_s 540
#
# It prints the python, torch and CUDA it found, installs the carried wheels with --no-index into $SITE,
# puts $SITE and the repository on PYTHONPATH and runs tools/gpu_check.py. With $OUT set, the log and
# the table are written there line by line (gpu-check.log, gpu-check-table.txt, gpu-device.log).
# `make gpu-rehearse` runs this same script on the CPU with PYTHON, WHEELS and SITE pointing at a venv
# that holds only packages the device has, and the wheels built for that venv's Python.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/site}
export PYTHONUNBUFFERED=1
SETUP_LOG=/dev/null
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && SETUP_LOG=$OUT/gpu-device.log
fi
say() { echo "$*" | tee -a "$SETUP_LOG"; }
: >"$SETUP_LOG"

# 1. What this machine has, before anything else.
say "gpu_device.sh: $("$PYTHON" - <<'EOF' 2>&1
import platform, sys
try:
    import torch
    cuda = torch.cuda.is_available()
    print(f"python {platform.python_version()} ({sys.executable}), torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}, GPU {torch.cuda.get_device_name() if cuda else 'none'}")
except Exception as e:
    print(f"python {platform.python_version()} ({sys.executable}), torch not importable: {type(e).__name__}: {e}")
EOF
)"

# 2. The carried wheels, installed offline (exactly the install the device notes give).
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
    say "FAIL: no wheels in $WHEELS/: run 'make gpu-wheels' on the CPU machine and carry [\"$WHEELS\"]"
    exit 3
fi
t0=$SECONDS
if ! "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$SITE" "${wheels[@]}" 2>&1 | tee -a "$SETUP_LOG"; then
    say "FAIL: installing the ${#wheels[@]} carried wheels from $WHEELS/ into $SITE failed (see above)"
    exit 3
fi
say "installed ${#wheels[@]} carried wheels from $WHEELS/ into $SITE in $((SECONDS - t0)) s"

[ -n "${GPU_INSTALL_ONLY:-}" ] && exit 0  # the rehearsal of .whl/ itself (cp312, no torch) stops here

# 3. The check itself, with the carried packages and the repository (andrea) importable.
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export GPU_CHECK_SITE="$SITE"
exec "$PYTHON" tools/gpu_check.py "$@"
