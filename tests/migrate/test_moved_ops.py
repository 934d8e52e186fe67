"""The old ``codedag.migrate.ops`` package and its subpackages import as the modules under
``codedag.backends.ops``, with one DeprecationWarning."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import codedag.backends.ops.cv2
import codedag.backends.ops.numpy.elementwise


def _old(name: str) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def test_old_names_are_the_new_module_objects() -> None:
    assert _old("codedag.migrate.ops.cv2") is codedag.backends.ops.cv2
    assert _old("codedag.migrate.ops.numpy.elementwise") is codedag.backends.ops.numpy.elementwise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from codedag.migrate.ops.cv2 import LIBRARY
        from codedag.migrate.ops.numpy.elementwise import where

    assert LIBRARY is codedag.backends.ops.cv2.LIBRARY
    assert where is codedag.backends.ops.numpy.elementwise.where


def test_the_new_modules_keep_their_own_name_and_spec() -> None:
    module = _old("codedag.migrate.ops.pil.image")
    assert module.__name__ == "codedag.backends.ops.pil.image"
    assert module.__spec__.name == "codedag.backends.ops.pil.image"
    assert importlib.reload(module) is module


def test_a_subpackage_is_an_attribute_of_the_old_package() -> None:
    package = _old("codedag.migrate.ops")
    assert package.audio is importlib.import_module("codedag.backends.ops.audio")


def test_one_warning_at_the_importing_line(tmp_path) -> None:
    script = tmp_path / "old_code.py"
    script.write_text(
        "import codedag.migrate.ops.cv2\n"
        "from codedag.migrate.ops.numpy import elementwise\n"
        "import codedag.backends.ops.cv2 as cv2\n"
        "assert codedag.migrate.ops.cv2 is cv2\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "DeprecationWarning" in line]
    assert lines == [
        f"{script}:1: DeprecationWarning: codedag.migrate.ops moved to codedag.backends.ops; "
        "import it from there (codedag.migrate.ops will be removed)"
    ]
