"""Headless Chromium for tests of the HTML pages: the page's DOM once it has rendered."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed"
)


def chromium_flags(profile: Path) -> list[str]:
    """Chromium headless, offline and quiet, with a profile folder of its own."""
    return [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        "--enable-logging=stderr",
        "--v=0",
    ]


def rendered_dom(page: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    """Chromium's ``--dump-dom`` of ``page`` after its scripts ran."""
    return subprocess.run(
        [*chromium_flags(profile), "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
