"""Resolve a target named on the command line (``path/to/script.py:function`` or
``package.module:function``): the one loader of ``trace``, ``tune`` and ``profile``."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codedag.errors import CodeDAGError, ConfigError

EXPECTED = "expected 'path/to/script.py:function' or 'package.module:function'"


def _import_file(path: Path, raises: type[CodeDAGError]) -> Any:
    if not path.is_file():
        raise raises(f"target file {path} does not exist; {EXPECTED}")
    name = path.stem if path.stem not in sys.modules else f"codedag_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise raises(f"cannot import {path} as a Python module; {EXPECTED}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(name, None)
        raise raises(f"importing {path} raised {type(error).__name__}: {error}") from error
    return module


def _current_folder_importable() -> None:
    """Make modules of the current folder importable, as ``python -m`` does: a console script's
    ``sys.path`` starts with its own folder, so ``train:make_loader`` in a project's folder
    would not be found."""
    for entry in ("", os.curdir, os.getcwd()):
        if entry in sys.path:
            return
    sys.path.insert(0, os.getcwd())


def load_target(
    spec: str, what: str = "target", raises: type[CodeDAGError] = ConfigError
) -> Callable[..., Any]:
    """The callable named by ``spec``, which takes no arguments.

    Args:
        spec: ``path/to/script.py:function`` or ``package.module:function`` (``a.b`` attribute
            paths allowed after the colon).
        what: how the message names the target (``--dataloader``).
        raises: the error class raised with what was wrong.
    """
    if ":" not in spec:
        raise raises(f"{what} {spec!r} names no function; {EXPECTED}")
    left, _, attr_path = spec.rpartition(":")
    if not left or not attr_path:
        raise raises(f"{what} {spec!r} is incomplete; {EXPECTED}")
    if left.endswith(".py") or "/" in left or "\\" in left:
        module = _import_file(Path(left), raises)
    else:
        _current_folder_importable()
        try:
            module = importlib.import_module(left)
        except ModuleNotFoundError as error:
            raise raises(f"{what} module {left!r} not found ({error}); {EXPECTED}") from error
        except Exception as error:
            raise raises(f"importing {left} raised {type(error).__name__}: {error}") from error
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise raises(f"{what} {spec!r}: {left} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise raises(
            f"{what} {spec!r} is a {type(obj).__name__}, not callable; expected a function "
            "that takes no arguments"
        )
    try:
        required = [
            p.name
            for p in inspect.signature(obj).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    except (TypeError, ValueError):
        required = []
    if required:
        raise raises(
            f"{what} {spec!r} requires arguments {required}; expected a function that takes no "
            "arguments (wrap the call in one)"
        )
    return obj
