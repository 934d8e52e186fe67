"""Which code objects and C functions a window records: classified once, looked up per event.

The hooks read :attr:`Classifier.code_cache` and :attr:`Classifier.c_cache` directly (one dict
lookup per event) and call the classifier only on a miss. Code objects are looked up by ``id()``:
hashing one hashes its bytecode and constants (0.2 µs on Python 3.11, 1 µs on 3.12, at every
event); the tables hold the code objects, so an id is never reused while its entry exists. Classifying (the filter's module
prefixes, paths, canonical names) is the costly part, so results outlive a window: windows
whose filters have the same prefixes share one :class:`Classifications` per process (a new
tracer per batch classifies nothing twice). The recording wrappers of library functions
(:mod:`codedag.trace.interpose`) have code objects of their own, classified as the functions
they wrap.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

import codedag.trace.interpose as interpose
from codedag.trace.costs import Meter
from codedag.trace.filter import FunctionFilter, callable_info, code_info

# The layout slot (info[3]) of a recording wrapper's entry: its arguments are ``args`` and
# ``kwargs`` of its frame (see CallRecorder.record_wrapped).
WRAPPER = "<wrapper>"
# Bound on each shared table: code objects made at run time (exec) must not grow it forever.
_MAX_SHARED = 100_000


class Classifications:
    """Classification results shared by the windows of one filter configuration.

    Args:
        function_filter: the filter that decides.
        user_codes: code objects always treated as user code.
    """

    def __init__(
        self, function_filter: FunctionFilter, user_codes: frozenset[types.CodeType] = frozenset()
    ) -> None:
        self.filter = function_filter
        self.user_codes = user_codes
        self.codes: dict[int, tuple[Any, Any, Any]] = {}  # id(code) -> (code, module, entry)
        self.functions: dict[Any, Any] = {}  # module-level C function -> entry
        self.methods: dict[tuple[type, str], Any] = {}  # (receiver type, name) -> entry

    def code(self, code: types.CodeType, frame: types.FrameType) -> Any:
        """The entry of a code object run in ``frame`` (see :func:`code_info`)."""
        wrapped = interpose.WRAPPER_CODES.get(code)
        if wrapped is not None:
            return (wrapped[0], wrapped[1], (), WRAPPER)
        module = frame.f_globals.get("__name__")
        hit = self.codes.get(id(code))
        if hit is not None and hit[0] is code and hit[1] == module:
            return hit[2]
        info = code_info(self.filter, code, frame, self.user_codes)
        if len(self.codes) >= _MAX_SHARED:
            self.codes.clear()
        self.codes[id(code)] = (code, module, info)
        return info

    def function(self, func: object) -> Any:
        """Classify a C function called through a module (or unbound): ``(name, library
        key)``, or None to skip."""
        info = self.functions[func] = callable_info(self.filter, func)
        if len(self.functions) >= _MAX_SHARED:
            self.functions.clear()
        return info

    def method(self, func: object, key: tuple[type, Any]) -> Any:
        """Classify a C method bound to an instance of ``key[0]`` (or a classmethod of it)."""
        info = self.methods[key] = callable_info(self.filter, func)
        if len(self.methods) >= _MAX_SHARED:
            self.methods.clear()
        return info


# filter prefixes -> (number of modules imported when made, classifications)
_shared: dict[tuple[Any, ...], tuple[int, Classifications]] = {}
_shared_lock = threading.Lock()


def shared_classifications(function_filter: FunctionFilter) -> Classifications:
    """The process's classifications for filters with ``function_filter``'s prefixes.

    They start afresh (with ``function_filter``) whenever a module was imported since they
    were made: an import can change a decision (NumPy's public names, known libraries).
    """
    key = (function_filter._include, function_filter._exclude, function_filter._libraries)
    modules = len(sys.modules)
    with _shared_lock:
        hit = _shared.get(key)
        if hit is None or hit[0] != modules:
            hit = _shared[key] = (modules, Classifications(function_filter))
        return hit[1]


class Classifier:
    """One window's view of the classifications: entries by code object and C function.

    A window may change its own entries (a function no longer recorded becomes None) without
    touching the shared ones. Classification time on a miss is the tracer's own time.

    Args:
        classifications: the shared results.
        meter: charged with the time of each classification.
    """

    def __init__(self, classifications: Classifications, meter: Meter) -> None:
        self.classifications = classifications
        self.meter = meter
        self.code_cache: dict[int, Any] = {}  # id(code) -> entry (None: skip)
        self.codes: list[types.CodeType] = []  # the code objects of code_cache, kept alive
        self.c_cache: dict[Any, Any] = {}  # module-level C functions

    def code(self, code: types.CodeType, frame: types.FrameType) -> Any:
        """Classify a code object seen for the first time in this window."""
        c0 = self.meter.clock()
        info = self.code_cache[id(code)] = self.classifications.code(code, frame)
        self.codes.append(code)
        self.meter.charge(c0)
        return info

    def stop_recording(self, code: types.CodeType) -> None:
        """Skip ``code`` for the rest of the window (it was classified before)."""
        self.code_cache[id(code)] = None

    def c_function(self, func: object, owner: object) -> Any:
        """The entry of a C function (``owner``: its ``__self__``); kept for the window when
        it is called through a module (bound methods are new objects at every call)."""
        shared = self.classifications
        if owner is None or type(owner) is types.ModuleType:
            info = shared.functions.get(func, False)
            if info is False:
                c0 = self.meter.clock()
                info = shared.function(func)
                self.meter.charge(c0)
            self.c_cache[func] = info
            return info
        # a bound method: by its receiver's class (the class itself for classmethods)
        key = (owner if isinstance(owner, type) else type(owner), getattr(func, "__name__", ""))
        info = shared.methods.get(key, False)
        if info is False:
            c0 = self.meter.clock()
            info = shared.method(func, key)
            self.meter.charge(c0)
        return info

    def skipped(self, func: object) -> bool:
        """Whether the filter skips a callable (a statement's call of it is not a step)."""
        return callable_info(self.classifications.filter, func) is None
