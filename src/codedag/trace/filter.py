"""Which calls the tracer records: user code and the entry points of libraries.

Every Python code object and C function is classified once (results are cached per code object
by the tracer):

- **skipped**: the interpreter and the standard library (but for the modules a library package
  declares: Python's ``random``), codedag itself, excluded packages;
- **user code**: recorded at every depth up to ``max_depth``;
- **library code** (third-party packages: cv2, numpy, PIL, torch, librosa, ...): recorded only at
  the entry into the library, i.e. when the nearest recorded caller belongs to another library or
  to user code. A library's internals are not recorded, but user callbacks it makes are
  (``DataLoader.__next__`` -> ``Dataset.__getitem__``).

Libraries are keyed by top-level package, with a few finer keys (``torch.utils.data``'s collate
functions are their own library, so ``default_collate`` shows up under ``__next__``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from codedag.backends import libraries
from codedag.backends.derived import SetView
from codedag.backends.names import (
    canonical_name,
    is_numpy_dispatcher,
    is_shared_wrapper,
    public_code_name,
    qualname_of,
)
from codedag.trace.records import IMPORT

# Packages skipped entirely by default: tooling around the traced code, never the pipeline.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    "codedag",
    "_pytest",
    "pytest",
    "pluggy",
    "rich",
    "tqdm",
    "typing_extensions",
    "importlib_metadata",
    "pkg_resources",
    "setuptools",
    "coverage",
    "IPython",
    "ipykernel",
    "debugpy",
    "pydevd",
    "pybind11_builtins",
    "numba",  # JIT compilation on first call: tens of thousands of compiler calls
    "llvmlite",
    "lazy_loader",
)

# Libraries without an ops package whose calls are library calls wherever they are installed.
OTHER_LIBRARIES: frozenset[str] = frozenset({"kornia"})


def _known_libraries() -> frozenset[str]:
    return libraries.library_packages() | OTHER_LIBRARIES


KNOWN_LIBRARIES: Set[str] = SetView(_known_libraries)
"""Libraries whose calls are library calls wherever they are installed (a package installed with
`pip install --target` or put on PYTHONPATH lives outside site-packages): those of every library
package (its modules and what it calls into) and :data:`OTHER_LIBRARIES`."""

# Packages of codedag that are user code to the tracer: the example pipelines it ships and the
# demo's data sets.
DEFAULT_INCLUDE: tuple[str, ...] = (
    "codedag.experiments.pipelines",
    "codedag.experiments.demo_data",
)

# Module prefix -> library key, for modules that are an entry point of their own.
LIBRARY_KEYS: dict[str, str] = {
    "torch.utils.data._utils.collate": "torch.utils.data.collate",
}

_STDLIB_DIRS = tuple(
    os.path.normcase(os.path.realpath(p)) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)
_STDLIB_NAMES = frozenset(sys.stdlib_module_names) | {"builtins", "__future__"}


@dataclass(frozen=True)
class Decision:
    """How to record one function: its canonical name and library key (None: user code)."""

    name: str
    library: str | None


def library_key(module: str) -> str:
    """Library key of a module: its top-level package, or a finer key from LIBRARY_KEYS."""
    for prefix, key in LIBRARY_KEYS.items():
        if module == prefix or module.startswith(prefix + "."):
            return key
    return module.split(".", 1)[0]


@dataclass
class FunctionFilter:
    """Classify functions as skipped, user code or library entry points.

    Args:
        include: module prefixes always treated as user code (recorded at every depth), added
            to :data:`DEFAULT_INCLUDE` (codedag's example pipelines).
        exclude: module prefixes never recorded (added to :data:`DEFAULT_EXCLUDE`).
        libraries: module prefixes treated as libraries even outside site-packages.
    """

    include: Iterable[str] = ()
    exclude: Iterable[str] = ()
    libraries: Iterable[str] = ()
    _include: tuple[str, ...] = field(init=False, repr=False)
    _exclude: tuple[str, ...] = field(init=False, repr=False)
    _libraries: tuple[str, ...] = field(init=False, repr=False)
    _path_cache: dict[str, int] = field(init=False, repr=False, default_factory=dict)
    _callable_cache: dict[str, Decision | None] = field(
        init=False, repr=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self._include = tuple(DEFAULT_INCLUDE) + tuple(self.include)
        self._exclude = tuple(DEFAULT_EXCLUDE) + tuple(self.exclude)
        self._libraries = tuple(self.libraries)

    @staticmethod
    def _matches(module: str, prefixes: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    def library_key(self, module: str) -> str:
        """Library key of a module: its top-level package, or a finer key from LIBRARY_KEYS."""
        return library_key(module)

    def _path_kind(self, filename: str) -> int:
        """0: stdlib or interpreter internals, 1: other (user), 2: installed package."""
        kind = self._path_cache.get(filename)
        if kind is None:
            if filename.startswith("<") and not filename.startswith(("<stdin", "<string")):
                kind = 0  # <frozen importlib._bootstrap> and friends
            else:
                path = os.path.normcase(os.path.realpath(filename))
                if "site-packages" in path or "dist-packages" in path:
                    kind = 2
                elif path.startswith(_STDLIB_DIRS):
                    kind = 0
                else:
                    kind = 1
            self._path_cache[filename] = kind
        return kind

    def classify_module(self, module: str, filename: str | None) -> str | bool | None:
        """``False`` to skip, ``None`` for user code, else the library key."""
        if self._matches(module, self._include):
            return None
        if self._matches(module, self._exclude):
            return False
        if self._matches(module, self._libraries):
            return self.library_key(module)
        top = module.split(".", 1)[0]
        if top.startswith("namedtuple_"):
            return False  # methods collections.namedtuple generates with exec()
        if top.startswith("_") and top != "__main__":
            return False  # private top-level modules: import hooks, C accelerators
        if top in _STDLIB_NAMES and top in KNOWN_LIBRARIES:
            return self.library_key(module)  # a standard module a library package declares
        if filename is None:  # C function: its module decides
            if top in _STDLIB_NAMES:
                return False
            return self.library_key(module)
        kind = self._path_kind(filename)
        if kind == 0 or (top in _STDLIB_NAMES and kind != 1):
            return False
        if kind == 2 or top in KNOWN_LIBRARIES:
            return self.library_key(module)
        return None

    def classify_code(self, code: types.CodeType, module: str) -> Decision | None:
        """Decision for a Python code object run with globals ``__name__ == module``."""
        verdict = self.classify_module(module, code.co_filename)
        if verdict is False:
            return None
        library = verdict if isinstance(verdict, str) else None
        return Decision(f"{module}.{qualname_of(code)}", library)

    def classify_callable(self, name: str) -> Decision | None:
        """Decision for a C function with canonical ``name`` (cached per name)."""
        try:
            return self._callable_cache[name]
        except KeyError:
            pass
        module = name.rsplit(".", 1)[0]
        verdict = self.classify_module(module, None)
        library = verdict if isinstance(verdict, str) else self.library_key(module)
        decision = None if verdict is False else Decision(name, library)
        self._callable_cache[name] = decision
        return decision


def code_info(
    function_filter: FunctionFilter,
    code: types.CodeType,
    frame: types.FrameType,
    user_codes: frozenset[types.CodeType] = frozenset(),
) -> Any:
    """The tracer's cached entry for a code object.

    Returns:
        ``IMPORT`` for a module body, None to skip, else ``(name, library key, parameter
        names, parameter layout)`` (library key None for user code; the layout is
        ``(positional-only count, positional count, keyword-only count, has *args, has
        **kwargs)``).
    """
    if code.co_name == "<module>" and code not in user_codes:
        return IMPORT  # a module body: an import inside the window
    caller = frame.f_back
    if caller is not None and caller.f_code.co_filename.startswith("<frozen importlib"):
        return IMPORT  # an import hook (a finder or loader on sys.meta_path) run by an import
    module = frame.f_globals.get("__name__") or "__main__"
    if code in user_codes:
        decision: Decision | None = Decision(f"{module}.{qualname_of(code)}", None)
    else:
        decision = function_filter.classify_code(code, module)
    if decision is None:
        return None
    if decision.library is not None and qualname_of(code) in ("__getattr__", "__dir__"):
        return None  # a module's lazy attribute lookup (numpy.fft on first use), not a function
    if decision.library is not None:
        if is_numpy_dispatcher(code, module):
            return None  # it only forwards the arguments; the function itself comes next
        if is_shared_wrapper(code):
            return None  # a decorator's wrapper: the function it wraps comes next, named
        public = public_code_name(code)  # numpy.clip, scipy.signal.resample_poly
        if public is not None:
            decision = Decision(public, decision.library)
    varargs, varkw = bool(code.co_flags & 0x04), bool(code.co_flags & 0x08)  # *args, **kwargs
    n = code.co_argcount + code.co_kwonlyargcount + varargs + varkw
    layout = (code.co_posonlyargcount, code.co_argcount, code.co_kwonlyargcount, varargs, varkw)
    return (decision.name, decision.library, code.co_varnames[:n], layout)


def callable_info(function_filter: FunctionFilter, func: object) -> tuple[str, str | None] | None:
    """The tracer's cached entry for a C function: ``(name, library key)`` or None to skip."""
    try:
        decision = function_filter.classify_callable(canonical_name(func))
    except Exception:  # an exotic callable without names: not worth recording
        return None
    return None if decision is None else (decision.name, decision.library)
