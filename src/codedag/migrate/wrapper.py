"""UniversalWrapper: decides per call whether to run the torch backend or the original.

The replacement installed for a function is a plain Python function (so it binds as a method when
installed on a class such as ``PIL.Image.Image``); a NumPy ufunc gets a proxy object that keeps
the ufunc's methods. Its hot path, cheapest first:

* inside a migrated call (a backend or the value conversion calling patched code): the original,
  with no bookkeeping;
* a function whose planned calls all share one placement (the usual case): straight to the
  backend, no stack walk, one attribute test (``route.slow``) for everything that is rare: the
  guard still checking, a call site that gave up, a restored wrapper, a fresh process;
* otherwise the placement is looked up by the caller's code object; where the plan names a frame
  further out, the enclosing frames are walked only as far as needed (the first frame whose name
  decides, see :meth:`codedag.plan.context.ContextMatcher.decided_by_caller`) and the answer is
  cached along that path. Unplanned calls pass through to the original.

Any exception of the migrated path (``UnsupportedOperation`` included) runs the original instead;
the first reason per function is logged, every reason is counted in :meth:`UniversalWrapper.stats`.
After :meth:`UniversalWrapper.deactivate` (the migrator's restore) a replacement still held
somewhere only forwards to the original. A replacement pickles as its original does, so
``multiprocessing.Pool.map(np.sin, ...)`` works while patched.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import Executor
from codedag.backends.registry import OpSpec
from codedag.devices.workers import effective_device, final_effective_device, install_fork_hook
from codedag.migrate.call_counts import CallCounts
from codedag.migrate.guard import Checked, Guard, GuardSettings, merge_worker_stats
from codedag.migrate.proxy import Count, ufunc_proxy
from codedag.migrate.workerstats import publish_now
from codedag.patching import like_original
from codedag.plan.context import ContextMatcher, Placement, frame_name
from codedag.util import forks

log = logging.getLogger(__name__)

_STACK_CACHE_SIZE = 4096
GIVE_UP_AFTER = 16
"""Consecutive fallbacks at one call site (code object) after which the original runs there."""


_DISCARD = Count().add  # counts calls of a deactivated wrapper nowhere


class _State(threading.local):
    def __init__(self) -> None:
        self.counters: dict[str, list[Any]] = {}


_STATE = _State()

# Threads inside a migrated call (backend or value conversion running): patched functions called
# there run the original. A set checked for emptiness first keeps the common path to one test.
_BUSY: set[int] = set()

_LIVE: weakref.WeakSet[UniversalWrapper] = weakref.WeakSet()
_fork_hook_lock = threading.Lock()
_fork_hook_installed = False


class _Route:
    """What the constant-placement hot path reads per call (per process)."""

    __slots__ = ("count", "device", "slow")

    def __init__(self) -> None:
        self.slow = True  # the first call resolves the device for this process
        self.device = ""
        self.count: Callable[[], int] = _DISCARD


def once_only(spec: OpSpec) -> str | None:
    """Why each call of ``spec`` must run exactly once (the guard would run it twice), or
    ``None``: it writes into its arguments, or it draws random numbers (a second run advances
    the generator again, and every later draw changes)."""
    if spec.inplace_args:
        return "modifies its arguments in place"
    if spec.quirks.random:
        return "draws random numbers: a second run would advance the generator twice"
    return None


class UniversalWrapper:
    """Runs one library function through its torch backend where the plan places it.

    Args:
        spec: the registry's spec of the function.
        original: the function being replaced.
        matcher: the plan's placements of this function (devices already mapped to this host).
        converters: one :class:`ValueConverter` per device, shared by all wrappers of a migrator
            so that a value returned by one migrated call is reused by the next.
        guard: check the first migrated calls against the original and keep the placement only
            if it matches and does not lose time (:mod:`codedag.migrate.guard`); ``None``: off.
    """

    def __init__(
        self,
        spec: OpSpec,
        original: Callable[..., Any],
        matcher: ContextMatcher,
        converters: Mapping[str, ValueConverter],
        guard: GuardSettings | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.original = original
        self.matcher = matcher
        self.converters = converters
        self._calls = CallCounts(spec.name)
        self._lock = threading.Lock()
        self._inert = False
        self.executor = Executor(spec, original, converters)
        self.guard = Guard(
            spec.name, guard, disabled_reason=once_only(spec), on_decision=self._decided
        )
        if guard is not None and self.guard.disabled_reason:
            log.info("guard: %s is not checked: it %s", self.name, self.guard.disabled_reason)
        self.worker_reports: Callable[[], list[dict[str, int]]] | None = None
        """Each forked worker's :meth:`report` (set by the injector), merged into ``stats``."""
        # Enough frames for the plan's enclosing names plus frames the tracer filtered out.
        self._walk_depth = min(64, 4 * matcher.depth + 4)
        # id(caller code) -> decision, and deeper paths id(code) -> {id(code) -> ... decision}.
        self._by_code: dict[int, tuple[Any, ...]] = {}
        self._trie: dict[int, Any] = {}
        self._trie_size = 0
        self._keep_alive: dict[int, Any] = {}  # id -> code: ids in the caches stay unique
        self._failures: dict[int, int] = {}
        self._given_up: dict[int, Any] = {}
        self._route = _Route()
        self.function = self._build()
        _LIVE.add(self)
        _install_fork_hook()

    # -- the replacement ---------------------------------------------------------------------
    def _build(self) -> Callable[..., Any]:
        original = self.original
        busy = _BUSY
        get_ident = threading.get_ident
        nested = self._calls.nested.add
        if self.matcher.constant:
            route = self._route
            execute = self.executor.run
            slow = self._slow_constant
            fall_back = self._fall_back

            def replacement(*args: Any, **kwargs: Any) -> Any:
                if busy and get_ident() in busy:
                    nested()
                    return original(*args, **kwargs)
                if route.slow:
                    return slow(args, kwargs)
                ident = get_ident()
                busy.add(ident)
                try:
                    result = execute(args, kwargs, route.device)
                except Exception as error:
                    busy.discard(ident)
                    return fall_back(error, args, kwargs)
                except BaseException:
                    busy.discard(ident)
                    raise
                busy.discard(ident)
                route.count()
                return result

        else:
            decide = self._decide
            migrate = self._migrate_at
            by_code = self._by_code.get
            getframe = sys._getframe

            def replacement(*args: Any, **kwargs: Any) -> Any:
                if busy and get_ident() in busy:
                    nested()
                    return original(*args, **kwargs)
                caller = getframe(1)
                decision = by_code(id(caller.f_code))
                if decision is None:
                    decision = decide(caller)
                if decision[0] is None:
                    decision[2]()
                    return original(*args, **kwargs)
                return migrate(args, kwargs, decision)

        like_original(replacement, original)
        replacement.__codedag_wrapper__ = self  # type: ignore[attr-defined]
        if type(original).__name__ == "ufunc":
            module = self.name.rsplit(".", 1)[0]
            return ufunc_proxy(replacement, original, self, module)
        return replacement

    # -- placement ---------------------------------------------------------------------------
    def _decision(self, placement: Placement, level: str) -> tuple[Any, ...]:
        """``(plan device, level, counter)``: the counter counts a pass-through."""
        return (placement, level, self._calls.passed.add)

    def _decide(self, caller: Any) -> tuple[Any, ...]:
        """Match the enclosing frames of ``caller`` against the plan (the slow path).

        Placements that do not depend on the call's own counter are cached along the path of
        code objects that decided them (kept alive by the cache, so an id is never reused).
        """
        if self._inert:
            decision = (None, "restored", _DISCARD)
            self._by_code[id(caller.f_code)] = decision
            return decision
        node = self._trie
        frame = caller
        while frame is not None:
            entry = node.get(id(frame.f_code))
            if entry is None:
                break
            if type(entry) is tuple:
                return entry
            node = entry
            frame = frame.f_back
        frames = []
        frame = caller
        for _ in range(self._walk_depth):
            if frame is None:
                break
            frames.append(frame)
            frame = frame.f_back
        names = [frame_name(f) for f in frames]
        counters = _STATE.counters
        slot = counters.get(self.name)
        if slot is not None and slot[0] is caller:
            slot[1] += 1
            index = slot[1]
        else:
            counters[self.name] = [caller, 0]
            index = 0
        placement, level, independent = self.matcher.match_detail(tuple(names[::-1]), index)
        decision = self._decision(placement, level)
        deciding = next((i for i, n in enumerate(names) if n in self.matcher.innermost), None)
        if deciding is not None and self.matcher.decided_by_caller(names[deciding]):
            self._remember([f.f_code for f in frames[: deciding + 1]], decision)
        elif independent:
            self._remember([f.f_code for f in frames], decision)
        return decision

    def _remember(self, codes: list[Any], decision: tuple[Any, ...]) -> None:
        with self._lock:
            if len(codes) == 1:
                self._by_code[id(codes[0])] = decision
                self._keep_alive[id(codes[0])] = codes[0]
                return
            if self._trie_size >= _STACK_CACHE_SIZE:
                return
            node = self._trie
            for code in codes[:-1]:
                entry = node.setdefault(id(code), {})
                if type(entry) is tuple:
                    return  # a shorter path already decides
                node = entry
            node[id(codes[-1])] = decision
            self._keep_alive.update((id(code), code) for code in codes)
            self._trie_size += 1

    # -- the migrated path -------------------------------------------------------------------
    def _migrate_at(self, args: tuple[Any, ...], kwargs: dict[str, Any], decision: Any) -> Any:
        # Frames: 0 _migrate_at, 1 replacement, 2 the caller.
        device, level = decision[0], decision[1]
        if self._route.slow:
            return self._migrate_slow(args, kwargs, device, level, sys._getframe(2).f_code)
        used = device if device == "cpu" else effective_device(device)
        try:
            result = self._executed(args, kwargs, used)
        except Exception as error:
            return self._failed(error, args, kwargs, sys._getframe(2).f_code)
        self._calls.placement(level, used).add()
        return result

    def _executed(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        """The call through its backend on ``device``, this thread marked busy meanwhile (the
        patched calls the backend makes run their originals)."""
        ident = threading.get_ident()
        _BUSY.add(ident)
        try:
            return self.executor.run(args, kwargs, device)
        finally:
            _BUSY.discard(ident)

    def _slow_constant(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Frames: 0 _slow_constant, 1 replacement, 2 the caller.
        if self._inert:
            return self.original(*args, **kwargs)
        code = sys._getframe(2).f_code
        if self._given_up and id(code) in self._given_up:
            self._calls.passed.add()
            return self.original(*args, **kwargs)
        return self._migrate_slow(args, kwargs, self.matcher.default, "name", code)

    def _migrate_slow(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], device: Any, level: str, code: Any
    ) -> Any:
        """A migrated call while something rare holds: guard, failures, a fresh process."""
        guard = self.guard
        if self._inert or device is None or guard.switched_off:
            if not self._inert:
                self._calls.passed.add()
            return self.original(*args, **kwargs)
        used = effective_device(device)
        if guard.checking:
            return self._guarded(args, kwargs, used, level, code)
        try:
            result = self._executed(args, kwargs, used)
        except Exception as error:
            return self._failed(error, args, kwargs, code)
        self._succeeded(code)
        counter = self._calls.placement(level, used)
        counter.add()
        if self.matcher.constant and final_effective_device(device) == used:
            self._route.device = used  # the fast path may skip the device lookup from now on
            self._route.count = counter.add
            self._refresh_route()
        return result

    def _guarded(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], device: str, level: str, code: object
    ) -> Any:
        ident = threading.get_ident()
        _BUSY.add(ident)  # patched calls inside either path run their originals
        try:
            checked: Checked = self.guard.run(
                lambda: self.executor.run(args, kwargs, device),
                lambda: self.original(*args, **kwargs),
                device,
            )
        except BaseException:
            self._calls.passed.add()  # the original raised: the library rejects these arguments
            raise
        finally:
            _BUSY.discard(ident)
        if checked.backend_error is not None:
            self._calls.record_fallback(checked.backend_error)
            self._note_failure(code)
        elif checked.difference is not None:
            self._calls.record_fallback(RuntimeError(f"result differs: {checked.difference}"))
        else:
            self._succeeded(code)
            self._calls.placement(level, device).add()
        return checked.result

    def _decided(self, guard: Guard) -> None:
        self._refresh_route()
        publish_now()  # a forked worker's decision reaches the parent even if it is killed next

    def _fall_back(self, error: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Frames: 0 _fall_back, 1 replacement, 2 the caller.
        return self._failed(error, args, kwargs, sys._getframe(2).f_code)

    def _failed(
        self, error: Exception, args: tuple[Any, ...], kwargs: dict[str, Any], code: object
    ) -> Any:
        self._calls.record_fallback(error)
        self._note_failure(code)
        return self.original(*args, **kwargs)

    def _succeeded(self, code: object) -> None:
        if self._failures and self._failures.pop(id(code), None) is not None:
            self._refresh_route()

    def _note_failure(self, code: Any) -> None:
        """After GIVE_UP_AFTER fallbacks in a row at one call site, stop trying there."""
        count = self._failures.get(id(code), 0) + 1
        self._failures[id(code)] = count
        if count >= GIVE_UP_AFTER:
            self._failures.pop(id(code), None)
            self._given_up[id(code)] = code
            self._by_code[id(code)] = (None, "given up", self._calls.passed.add)
            self._keep_alive[id(code)] = code
            log.info(
                "%s: %d fallbacks in a row at %s:%d; running the original there from now on",
                self.name,
                count,
                code.co_filename,
                code.co_firstlineno,
            )
        self._refresh_route()

    def _refresh_route(self) -> None:
        """Send calls down the slow path while anything rare needs looking at."""
        route = self._route
        route.slow = bool(
            self._inert
            or (self.matcher.constant and not route.device)
            or self.guard.checking
            or self.guard.switched_off
            or self._given_up
            or self._failures
        )

    # -- life cycle --------------------------------------------------------------------------
    def deactivate(self) -> None:
        """Forward every later call to the original, counting nothing (after restore)."""
        self._inert = True
        self._route.slow = True
        with self._lock:
            self._by_code.clear()
            self._trie.clear()
            self._trie_size = 0

    def _after_fork_in_child(self) -> None:
        """A forked child resolves its device and checks its guard afresh, unless workers
        forked earlier already decided on the device this child runs on."""
        self._lock = threading.Lock()  # another thread of the parent may have held it
        self._calls.after_fork()  # a child reports the reasons of its own fallbacks
        self._route.device = ""
        self._route.count = _DISCARD
        self.guard.reset()
        default = self.matcher.default
        if default is not None and self.guard.inherited:
            self.guard.start_inherited(effective_device(default))
        self._refresh_route()

    def _before_fork(self) -> None:
        """In the parent: take in what the workers it forked so far decided, for the next ones."""
        default = self.matcher.default
        if self.worker_reports is None or default is None or not self.guard.checking:
            return
        worker_device = "cpu" if str(default).startswith("cuda") else str(default)
        self.guard.adopt_workers(self.worker_reports(), worker_device)

    # -- statistics --------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """The four counters, read without a lock (safe in a freshly forked child)."""
        return self._calls.counts()

    def report(self) -> dict[str, int]:
        """What a forked worker reports: :meth:`counts` and the guard's fields."""
        return {**self.counts(), **self.guard.fields()}

    def fallback_reasons(self) -> dict[str, int]:
        """Reason -> fallbacks counted in this process (in a forked child: since its fork)."""
        return self._calls.fallback_reasons()

    def stats(self) -> dict[str, Any]:
        """Counters of this function: migrated, fell back (with reasons), passed through, guard."""
        counted = self._calls.stats(given_up_call_sites=len(self._given_up))
        guard = self.guard.stats()
        if self.worker_reports is not None:
            guard = merge_worker_stats(guard, self.worker_reports())
        return {"strategy": self.spec.strategy.value, **counted, "guard": guard}


def _reset_in_child() -> None:
    _BUSY.clear()  # only the forking thread lives on, and it is not inside a migrated call
    for wrapper in list(_LIVE):
        wrapper._after_fork_in_child()


def _before_fork() -> None:
    for wrapper in list(_LIVE):
        try:
            wrapper._before_fork()
        except Exception as error:  # never let bookkeeping break a fork
            log.debug("%s: worker decisions not adopted: %s", wrapper.name, error)


def _install_fork_hook() -> None:
    global _fork_hook_installed
    if _fork_hook_installed:
        return
    install_fork_hook()  # a forked child also forgets which devices it may use
    with _fork_hook_lock:
        if not _fork_hook_installed:
            forks.on_fork(before=_before_fork, after_in_child=_reset_in_child)
            _fork_hook_installed = True
