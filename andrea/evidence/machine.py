"""The machine a grid's runs are trained on: how many at a time (``workers``), which kind of CPU computes
them (``cpu_identity``), and worker processes that end with the process that started them
(``die_with_parent``). ``evidence.store`` re-exports all three."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path


def die_with_parent(parent: int) -> None:
    """(In a worker process.) End this worker when ``parent``, the process that started it, dies, even by
    SIGKILL, which runs no clean-up: otherwise an idle worker waits for work forever. The parent's id is
    passed in, not read here (a worker still starting when its parent dies would read its new parent's);
    polled once a second."""
    import threading

    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="die-with-parent").start()


def cpu_identity() -> str:
    """The kind of CPU this process computes on, as far as a float's last bits go: the processor's model
    and torch's vector kernels (``ATEN_CPU_CAPABILITY`` included). Two runs of one cell on the same kind
    are bit-identical; on another kind (an AMD against an Intel processor, AVX2 against AVX-512) they
    differ in the last bits, which a long, unstable run can grow into visible differences."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if sys.platform == "darwin":
        r = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
        model = r.stdout.strip() or model
    return f"{model}, {torch.backends.cpu.get_cpu_capability()}"


def workers() -> int:
    n = os.environ.get("ANDREA_WORKERS")
    if n:
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"ANDREA_WORKERS must be a positive integer, got {n!r}")
        return int(n)
    return max(1, min(2, os.cpu_count() or 1))
