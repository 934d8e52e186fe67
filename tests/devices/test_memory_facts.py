"""The machine's memory as codedag reads it: the kernel's page count, as psutil reports it."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from codedag.devices import memory


def test_physical_memory_is_what_psutil_reports() -> None:
    assert memory.physical_memory_bytes() == psutil.virtual_memory().total


def test_without_a_page_count_psutil_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sysconf(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", no_sysconf)
    assert memory.physical_memory_bytes() == psutil.virtual_memory().total


def test_reading_it_imports_no_psutil() -> None:
    code = (
        "import sys; from codedag.devices.memory import physical_memory_bytes as m; m(); "
        "print('psutil' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
