"""The conformance corpus: for every registry name, calls generated to probe the backend against
the library: shapes ((H,W), (H,W,1), (H,W,3), (H,W,4), 1x1, empty), every dtype the library
accepts and some it rejects, layouts (non-contiguous, negative stride, Fortran order, read-only),
NaN and inf, and degenerate parameters. One module per library (``corpus_cv2``, ``corpus_numpy``,
...) declares its cases; this one gathers every ``corpus_*`` module of its folder.

A case is a function building its arguments afresh (``migrate_support.Case``), so the library and
the backend each get their own identical inputs. :func:`cases` lists the fixed corpus of a name
(what CI runs); :func:`explore` is the hypothesis strategy that draws further combinations.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from hypothesis import strategies as st
from migrate_support import Args, Labeled

# every corpus_<library>.py beside this module: a new library's corpus is found by itself
_MODULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(path.stem) for path in sorted(Path(__file__).parent.glob("corpus_*.py"))
)


def _module(name: str) -> ModuleType:
    for module in _MODULES:
        if name in module.NAMES:
            return module
    raise KeyError(f"no conformance corpus for {name}")


def cases(name: str) -> Labeled:
    """The fixed corpus of ``name`` (canonical)."""
    return _module(name).cases(name)


def covered() -> set[str]:
    """Names with a corpus."""
    return {n for module in _MODULES for n in module.NAMES}


def explore(name: str) -> st.SearchStrategy[tuple[str, Callable[[], Args]]]:
    """Random combinations of the corpus's ingredients for ``name``."""
    return _module(name).explore(name)
