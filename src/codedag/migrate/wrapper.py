"""UniversalWrapper: decides per call whether to run the torch backend or the original.

The replacement installed for a function is a plain Python function (so it binds as a method when
installed on a class such as ``PIL.Image.Image``). Its hot path:

* inside a migrated call (a backend or the value conversion calling patched code): the original,
  with no bookkeeping;
* a function whose planned calls all share one placement: straight to the backend, no stack walk;
* otherwise the enclosing frames are matched against the plan (:mod:`codedag.migrate.context`);
  unplanned calls pass through to the original.

Any exception of the migrated path (``UnsupportedOperation`` included) runs the original instead;
the first reason per function is logged as a warning, every reason is counted in
:meth:`UniversalWrapper.stats`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from codedag.errors import UnsupportedOperation
from codedag.migrate.context import _CODE_NAMES, ContextMatcher, Placement, frame_name
from codedag.migrate.devices import effective_device
from codedag.migrate.execute import Executor
from codedag.migrate.registry import OpSpec
from codedag.migrate.values import ValueConverter

log = logging.getLogger(__name__)

_MAX_REASONS = 20
_STACK_CACHE_SIZE = 4096
GIVE_UP_AFTER = 16
"""Consecutive fallbacks at one call site (code object) after which the original runs there."""


class _State(threading.local):
    def __init__(self) -> None:
        self.counters: dict[str, list[Any]] = {}


_STATE = _State()

# Threads inside a migrated call (backend or value conversion running): patched functions called
# there run the original. A set checked for emptiness first keeps the common path to one test.
_BUSY: set[int] = set()


def _count(counter: itertools.count[int]) -> int:
    """Current value of an ``itertools.count`` without advancing it."""
    return int(counter.__reduce__()[1][0])


class _UfuncProxy:
    """A NumPy ufunc's replacement: calls go to the wrapper, ``reduce``/``outer``/... to the ufunc.

    Each proxy has its own subclass whose ``__call__`` *is* the replacement function (a
    staticmethod), so no extra Python frame sits between the caller and the replacement.
    """

    def __init__(self, ufunc: Any, wrapper: Any) -> None:
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.__doc__ = ufunc.__doc__
        self.__codedag_wrapper__ = wrapper

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._ufunc, name)

    def __repr__(self) -> str:
        return f"<codedag wrapper of {self._ufunc!r}>"


def _ufunc_proxy(replacement: Callable[..., Any], ufunc: Any, wrapper: Any) -> _UfuncProxy:
    cls = type(f"codedag_{ufunc.__name__}", (_UfuncProxy,), {"__call__": staticmethod(replacement)})
    return cls(ufunc, wrapper)


class UniversalWrapper:
    """Runs one library function through its torch backend where the plan places it.

    Args:
        spec: the registry's spec of the function.
        original: the function being replaced.
        matcher: the plan's placements of this function (devices already mapped to this host).
        converters: one :class:`ValueConverter` per device, shared by all wrappers of a migrator
            so that a value returned by one migrated call is reused by the next.
    """

    def __init__(
        self,
        spec: OpSpec,
        original: Callable[..., Any],
        matcher: ContextMatcher,
        converters: Mapping[str, ValueConverter],
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.original = original
        self.matcher = matcher
        self.converters = converters
        self._passed = itertools.count()
        self._nested = itertools.count()
        self._fell_back = itertools.count()
        self._reasons: Counter[str] = Counter()
        self._placements: dict[tuple[str, str], itertools.count[int]] = {}
        self._lock = threading.Lock()
        self._warned = False
        self.executor = Executor(spec, original, converters)
        # Enough frames for the plan's enclosing names plus frames the tracer filtered out.
        self._walk_depth = min(64, 4 * matcher.depth + 4)
        self._by_code: dict[Any, tuple[Placement, str]] = {}
        self._by_stack: dict[tuple[int, ...], tuple[Placement, str]] = {}
        self._failures: dict[Any, int] = {}
        self._given_up: set[Any] = set()
        self._keep_alive: list[tuple[Any, ...]] = []
        self.function = self._build()

    # -- the replacement ---------------------------------------------------------------------
    def _build(self) -> Callable[..., Any]:
        original = self.original
        run = self._run
        nested = self._nested
        busy = _BUSY
        get_ident = threading.get_ident
        passed = self._passed
        getframe = sys._getframe
        given_up = self._given_up
        if self.matcher.constant:
            device = self.matcher.default

            def replacement(*args: Any, **kwargs: Any) -> Any:
                if busy and get_ident() in busy:
                    next(nested)
                    return original(*args, **kwargs)
                if given_up and getframe(1).f_code in given_up:
                    next(passed)
                    return original(*args, **kwargs)
                return run(args, kwargs, device, "name")

        else:
            decide = self._decide
            by_code = self._by_code.get

            def replacement(*args: Any, **kwargs: Any) -> Any:
                if busy and get_ident() in busy:
                    next(nested)
                    return original(*args, **kwargs)
                decision = by_code(getframe(1).f_code)
                if decision is None:
                    decision = decide()
                if decision[0] is None:
                    next(passed)
                    return original(*args, **kwargs)
                return run(args, kwargs, decision[0], decision[1])

        with contextlib.suppress(AttributeError, TypeError):
            functools.update_wrapper(replacement, original)
        replacement.__codedag_wrapper__ = self  # type: ignore[attr-defined]
        if type(original).__name__ == "ufunc":
            return _ufunc_proxy(replacement, original, self)  # type: ignore[return-value]
        return replacement

    def _decide(self) -> tuple[Placement, str]:
        """Match the enclosing frames against the plan (the placement's slow path).

        Placements that do not depend on the call's own counter are cached by the identities of
        the enclosing code objects (kept alive by the cache, so an id is never reused).
        """
        # Frames: 0 _decide, 1 replacement, 2 the caller.
        caller = sys._getframe(2)
        frame: Any = caller
        codes = []
        for _ in range(self._walk_depth):
            if frame is None:
                break
            codes.append(frame.f_code)
            frame = frame.f_back
        stack_key = tuple(map(id, codes))
        cached = self._by_stack.get(stack_key)
        if cached is not None:
            return cached
        names = _CODE_NAMES
        parents = tuple(names.get(f.f_code) or frame_name(f) for f in _frames(caller, len(codes)))[
            ::-1
        ]
        counters = _STATE.counters
        slot = counters.get(self.name)
        if slot is not None and slot[0] is caller:
            slot[1] += 1
            index = slot[1]
        else:
            counters[self.name] = [caller, 0]
            index = 0
        placement, level, independent = self.matcher.match_detail(parents, index)
        decision = (placement, level)
        if independent:
            if parents and self.matcher.decided_by_caller(parents[-1]):
                self._by_code[caller.f_code] = decision
            elif len(self._by_stack) < _STACK_CACHE_SIZE:
                self._by_stack[stack_key] = decision
                self._keep_alive.append(tuple(codes))
        return decision

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: Any, level: str) -> Any:
        if device is None:
            next(self._passed)
            return self.original(*args, **kwargs)
        ident = threading.get_ident()
        _BUSY.add(ident)
        try:
            used = device if device == "cpu" else effective_device(device)
            result = self.executor.run(args, kwargs, used)
        except Exception as error:
            _BUSY.discard(ident)
            self._record_fallback(error)
            # Frames: 0 _run, 1 replacement, 2 the caller.
            self._note_failure(sys._getframe(2).f_code)
            return self.original(*args, **kwargs)
        finally:
            _BUSY.discard(ident)
        if self._failures:
            self._failures.pop(sys._getframe(2).f_code, None)
        counter = self._placements.get((level, used))
        if counter is None:
            with self._lock:
                counter = self._placements.setdefault((level, used), itertools.count())
        next(counter)
        return result

    def _note_failure(self, code: Any) -> None:
        """After GIVE_UP_AFTER fallbacks in a row at one call site, stop trying there."""
        count = self._failures.get(code, 0) + 1
        self._failures[code] = count
        if count >= GIVE_UP_AFTER:
            self._failures.pop(code, None)
            self._given_up.add(code)
            self._by_code[code] = (None, "given up")
            log.info(
                "%s: %d fallbacks in a row at %s:%d; running the original there from now on",
                self.name,
                count,
                code.co_filename,
                code.co_firstlineno,
            )

    def _record_fallback(self, error: Exception) -> None:
        next(self._fell_back)
        reason = f"{type(error).__name__}: {error}"[:200]
        with self._lock:
            if reason in self._reasons or len(self._reasons) < _MAX_REASONS:
                self._reasons[reason] += 1
            else:
                self._reasons["(other reasons)"] += 1
            first = not self._warned
            self._warned = True
        if first:
            level = logging.INFO if isinstance(error, UnsupportedOperation) else logging.WARNING
            log.log(level, "%s: running the original (%s)", self.name, reason)

    # -- the migrated path -------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """The four counters, read without a lock (safe in a freshly forked child)."""
        migrated = sum(_count(c) for c in list(self._placements.values()))
        return {
            "migrated": migrated,
            "fell_back": _count(self._fell_back),
            "passed_through": _count(self._passed),
            "nested": _count(self._nested),
        }

    def stats(self) -> dict[str, Any]:
        """Counters of this function: migrated, fell back (with reasons), passed through."""
        levels: Counter[str] = Counter()
        devices: Counter[str] = Counter()
        with self._lock:
            for (level, device), counter in self._placements.items():
                count = _count(counter)
                levels[level] += count
                devices[device] += count
            return {
                "strategy": self.spec.strategy.value,
                "migrated": sum(levels.values()),
                "fell_back": _count(self._fell_back),
                "passed_through": _count(self._passed),
                "nested": _count(self._nested),
                "given_up_call_sites": len(self._given_up),
                "fallback_reasons": dict(self._reasons),
                "match_levels": dict(levels),
                "devices": dict(devices),
            }


def _frames(frame: Any, count: int) -> Any:
    for _ in range(count):
        yield frame
        frame = frame.f_back
