"""What a first ``codedag run`` pays inside its first epoch: imports done in the background
before planning, and library versions looked up once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PLANNED_LATER = (
    "codedag.backends.ops.cv2",
    "codedag.backends.ops.numpy",
    "codedag.trace.recorder",
    "codedag.calibrate.run",
    "codedag.calibrate.store_costs",
    "codedag.backends.batched.backends",
)


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_background_import_loads_what_planning_a_cv2_pipeline_needs() -> None:
    # a script that imported cv2: the planner's modules and cv2's and NumPy's backends load in
    # the background thread, so planning in the first epoch imports none of them; the backends
    # of a library the script never imported stay unloaded
    out = _run(
        f"""
        import sys
        import cv2, numpy, torch
        from codedag.integrations import prefetch
        prefetch.start()
        prefetch.settle()
        wanted = {PLANNED_LATER!r}
        print("missing", [m for m in wanted if m not in sys.modules])
        print("audio", "codedag.backends.ops.audio" in sys.modules, "librosa" in sys.modules)
        """
    )
    assert "missing []" in out
    assert "audio False False" in out


def test_each_library_version_is_looked_up_once_per_process() -> None:
    # the plan's key and the prefix cache's keys read the same libraries' versions: each
    # lookup scans the import path's package metadata
    out = _run(
        """
        import collections
        from importlib import metadata
        asked = collections.Counter()
        original = metadata.version
        def version(name):
            asked[name] += 1
            return original(name)
        metadata.version = version
        from codedag.integrations.plan_store import library_versions
        from codedag.migrate.cache.keys import versions
        library_versions()
        versions()
        library_versions()
        print("most", max(asked.values()), "libraries", len(asked))
        """
    )
    assert "most 1 " in out
    assert "libraries 0" not in out
