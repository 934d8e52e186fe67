"""Running a script of ``benchmarks/``: loaded as a module, as it runs (its folder on the
path), or in a process of its own."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (its sibling modules importable)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def run_benchmark(name: str, *args: str, timeout: float = 120) -> list[str]:
    """The lines ``python benchmarks/<name>.py ARGS`` prints (it must exit 0)."""
    command = [sys.executable, str(BENCH / f"{name}.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=timeout)
    return done.stdout.splitlines()
