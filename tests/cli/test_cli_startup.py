"""The CLI starts without the heavy libraries: building its parser (``codedag --help``) and
``codedag plans list`` import neither torch nor the array libraries, and the parser imports no
part of the tracer, the tuner or the plan models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LIBRARIES = ("torch", "numpy", "cv2", "PIL", "scipy", "librosa")


def _imported(script: str, env: dict[str, str] | None = None) -> list[str]:
    """The names of ``LIBRARIES`` and codedag's heavy packages that ``script`` leaves imported."""
    probe = (
        f"{script}\n"
        "import json, sys\n"
        f"names = {[*LIBRARIES, 'pydantic', 'codedag.trace', 'codedag.tune', 'codedag.plan']!r}\n"
        "print(json.dumps(sorted(n for n in names if n in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    imported: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return imported


def test_building_the_parser_imports_no_heavy_module() -> None:
    script = "import codedag.cli.main\ncodedag.cli.main.build_parser()"
    assert _imported(script) == []


def test_plans_list_imports_no_library(tmp_path: Path) -> None:
    script = (
        "from codedag.integrations.plan_store import save_plan\n"
        "save_plan('ab' * 12, {'context_device_map': {'ds.get/cv2.flip#0': 'cpu'}})\n"
        "from codedag.cli.main import main\n"
        "assert main(['plans', 'list']) == 0\n"
    )
    imported = _imported(script, {"CODEDAG_CACHE_DIR": str(tmp_path)})
    assert not set(imported) & set(LIBRARIES), imported
    assert "codedag.plan" in imported  # the stored plan was checked
