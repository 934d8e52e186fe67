"""Only ``codedag.devices`` asks torch whether CUDA is available, waits on a device or opens NVML.

The programs codedag runs as separate processes and that never import it (the example training
scripts of ``energy/examples/`` and the scaffolding templates) are user code, not codedag's: they
are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import codedag

ROOT = Path(codedag.__file__).parent
# pynvml.nvmlInit, and NVML opened through an alias of the module (nvml.nvmlInit())
HARDWARE = re.compile(r"torch\.cuda\.is_available\(|torch\.cuda\.synchronize\(|\bnvmlInit\(")
USER_PROGRAMS = ("energy/examples/",)


def codedag_sources() -> list[Path]:
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(USER_PROGRAMS)
    ]


def hardware_calls(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if HARDWARE.search(line)
    ]


def test_nothing_outside_devices_touches_the_hardware() -> None:
    outside = [
        call
        for path in codedag_sources()
        if "devices" not in path.relative_to(ROOT).parts[:1]
        for call in hardware_calls(path)
    ]
    assert outside == [], "\n".join(outside)


def test_the_search_finds_what_it_looks_for() -> None:
    inside = [call for path in (ROOT / "devices").rglob("*.py") for call in hardware_calls(path)]
    assert any("torch.cuda.is_available(" in call for call in inside)
    assert any("torch.cuda.synchronize(" in call for call in inside)
    assert any("nvml.nvmlInit(" in call for call in inside)
    assert len(codedag_sources()) > 200
