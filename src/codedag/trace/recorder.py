"""The hot path: a ``sys.setprofile`` hook and library wrappers that record raw call records.

Nothing here builds graph objects: the hook appends small lists (one per recorded call) and the
:class:`~codedag.trace.builder.DAGBuilder` turns them into an ExecutionDAG after the window. The
hook's own time is measured around every recorded event (two ``perf_counter_ns`` reads) and
subtracted later; skipped events cost a dict lookup and a counter increment.

Dataflow is tracked by object identity. Every tracked object is held through a weak reference
whose callback drops its entry when the object dies, or by a strong reference when the type does
not support weak references (tuples, lists, dicts), so a recycled ``id()`` never matches a dead
value.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
import threading
import time
import tracemalloc
import types
import weakref
from typing import Any

from codedag.trace.args import kept_object, small_bytes
from codedag.trace.filter import FunctionFilter, callable_info, code_info
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    CUR0,
    FRAME,
    IMPORT,
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_WRAPPED,
    LIB,
    MAX_ITEMS,
    MAX_NESTING,
    MEM,
    MEMORY_OFF,
    MEMORY_PER_CALL,
    MEMORY_WINDOW,
    N1,
    OV0,
    OV1,
    OWN0,
    PEAK,
    RET,
    SEQ,
    SKIP1,
    T0,
    T1,
    first_items,
    has_data,
)
from codedag.trace.values import MAX_CONTAINER_SCAN, SCALARS, DataTypes, describe

log = logging.getLogger(__name__)

_active: Session | None = None  # the innermost session; library wrappers report to it
_active_lock = threading.Lock()


def active_session() -> Session | None:
    """The innermost running session (any thread), or None."""
    return _active


class Session:
    """One tracing window: configuration, raw records and the hook closures.

    Args:
        function_filter: decides which calls are recorded.
        max_depth: calls nested deeper than this (0 = outermost) are not recorded.
        track_memory: measure the peak traced-memory increase of each call.
        data_types: which values become value nodes.
        user_codes: code objects always treated as user code (calibration uses this).
    """

    def __init__(
        self,
        function_filter: FunctionFilter,
        max_depth: int,
        track_memory: bool,
        data_types: DataTypes,
        user_codes: frozenset[types.CodeType] = frozenset(),
    ) -> None:
        self.filter = function_filter
        self.max_depth = max_depth
        self.track_memory = track_memory
        if not track_memory:
            self.memory_mode = MEMORY_OFF
        elif tracemalloc.is_tracing():
            self.memory_mode = MEMORY_WINDOW
        else:
            self.memory_mode = MEMORY_PER_CALL
        self.data_types = data_types
        self.user_codes = user_codes
        self.thread = threading.get_ident()
        self.calls: list[list[Any]] = []
        self.values: list[list[Any]] = []
        self.uses: list[tuple[int, int]] = []
        self.produces: list[tuple[int, int]] = []
        self.stack: list[list[Any]] = []
        self.live: dict[int, tuple[Any, int, int]] = {}
        self.error: str | None = None
        self.broken = False
        self.t_start_ns = 0
        self.t_stop_ns = 0
        # Hundreds of thousands of records make every full GC pass slower (traced code slows
        # down quadratically). The records are moved to the permanent generation every 64
        # calls with gc.freeze() and back with gc.unfreeze() at the end of the window, unless
        # the process already uses gc.freeze() itself.
        self.freeze_gc = gc.get_freeze_count() == 0
        self._make_hooks()

    # ------------------------------------------------------------------ classification
    def _classify_code(self, code: types.CodeType, frame: types.FrameType) -> Any:
        info = code_info(self.filter, code, frame, self.user_codes)
        self.code_cache[code] = info
        return info

    def _classify_c(self, func: Any) -> Any:
        return callable_info(self.filter, func)

    # ------------------------------------------------------------------ hooks
    def _make_hooks(self) -> None:
        calls, values, uses, produces = self.calls, self.values, self.uses, self.produces
        stack, live = self.stack, self.live
        code_cache: dict[types.CodeType, Any] = {}
        c_cache: dict[Any, Any] = {}
        bound_cache: dict[type, dict[str, Any]] = {}
        self.code_cache = code_cache
        classify_code, classify_c = self._classify_code, self._classify_c
        is_data = self.data_types.is_data
        data_cache = self.data_types._cache
        perf = time.perf_counter_ns
        max_depth = self.max_depth
        track_memory = self.memory_mode == MEMORY_WINDOW  # the whole-window measurement
        per_call = self.memory_mode == MEMORY_PER_CALL
        get_mem, reset_peak = tracemalloc.get_traced_memory, tracemalloc.reset_peak
        tm_start, tm_stop, tm_tracing = tracemalloc.start, tracemalloc.stop, tracemalloc.is_tracing
        module_type = types.ModuleType
        weak_ref = weakref.ref
        partial = functools.partial
        weakrefable: dict[type, bool] = {}
        scalars = frozenset(SCALARS)
        max_scan = MAX_CONTAINER_SCAN
        max_items, max_nesting = MAX_ITEMS, MAX_NESTING
        session = self
        gc_freeze = gc.freeze
        get_profile, set_profile = sys.getprofile, sys.setprofile
        freeze_gc = self.freeze_gc

        importing: list[types.FrameType] = []  # module bodies running: nothing is recorded
        seq = 0
        nskip = 0  # skipped events = nhi * 256 + nskip
        nhi = 0
        own_bytes = 0  # traced memory the tracer itself allocated
        ncalls = 0
        ovh = 0

        def forget(key: int, ref: weakref.ref) -> None:  # called when a tracked value dies
            entry = live.get(key)
            if entry is not None and entry[0] is ref:
                del live[key]

        def hold(obj: Any, vseq: int, version: int) -> None:
            cls = type(obj)
            can = weakrefable.get(cls)
            if can is None:
                try:
                    weakref.ref(obj)
                    can = True
                except TypeError:
                    can = False
                weakrefable[cls] = can
            key = id(obj)
            ref = weak_ref(obj, partial(forget, key)) if can else obj
            live[key] = (ref, vseq, version)

        def lookup(obj: Any) -> tuple[Any, int, int] | None:
            entry = live.get(id(obj))
            if entry is None:
                return None
            ref = entry[0]
            held = ref() if type(ref) is weak_ref else ref
            return entry if held is obj else None

        def new_value(obj: Any, version: int) -> int:
            nonlocal seq
            vseq = seq
            seq += 1
            name, type_name, shape, dtype, nbytes, device, strides = describe(obj)
            if type(obj) in (tuple, list, dict):
                nbytes = sum(describe(x)[4] for x in first_items(obj, max_scan) if is_data(type(x)))
            values.append([vseq, name, version, type_name, shape, dtype, nbytes, device, strides])
            hold(obj, vseq, version)
            return vseq

        def use(obj: Any, found: list[int]) -> int:
            entry = lookup(obj)
            vseq = entry[1] if entry is not None else new_value(obj, 0)
            if vseq not in found:
                found.append(vseq)
            return vseq

        def scan_arg(label: Any, obj: Any, args_out: list[Any], found: list[int]) -> None:
            cls = type(obj)
            if cls in scalars:
                args_out.append((label, ARG_SCALAR, obj))
            elif data_cache.get(cls) or is_data(cls):
                args_out.append((label, ARG_VALUE, use(obj, found)))
            elif cls is tuple or cls is list or cls is dict:
                if lookup(obj) is not None:
                    use(obj, found)
                elif len(obj) <= max_scan:
                    for item in obj.values() if cls is dict else obj:
                        if is_data(type(item)) or lookup(item) is not None:
                            use(item, found)
                args_out.append((label, ARG_CONTAINER, (cls.__name__, len(obj), None)))
            else:
                args_out.append((label, ARG_TYPE, cls))

        def payload(obj: Any, found: list[int], depth: int) -> tuple[int, Any]:
            """A library call's argument, kept whole enough to rebuild the call (see args.py)."""
            cls = type(obj)
            if cls in scalars:
                return ARG_SCALAR, obj
            if data_cache.get(cls) or is_data(cls):
                vseq = use(obj, found)
                data = small_bytes(obj)
                return (ARG_VALUE, vseq) if data is None else (ARG_SMALL, (vseq, data))
            if cls is tuple or cls is list or cls is dict:
                if lookup(obj) is not None:
                    use(obj, found)
                n = len(obj)
                if n > max_items or depth >= max_nesting:
                    if n <= max_scan:
                        for item in obj.values() if cls is dict else obj:
                            if is_data(type(item)) or lookup(item) is not None:
                                use(item, found)
                    return ARG_CONTAINER, (cls.__name__, n, None)
                items: list[tuple[Any, ...]]
                if cls is dict:
                    items = [(k, *payload(v, found, depth + 1)) for k, v in obj.items()]
                else:
                    items = [payload(v, found, depth + 1) for v in obj]
                return ARG_CONTAINER, (cls.__name__, n, items)
            if kept_object(obj):
                return ARG_OBJ, obj
            return ARG_TYPE, cls

        def scan_library_arg(label: Any, obj: Any, args_out: list[Any], found: list[int]) -> None:
            kind, data = payload(obj, found, 0)
            args_out.append((label, kind, data))

        def enter(
            h0: int,
            name: str,
            lib: str | None,
            kind: int,
            site: Any,
            args_out: list[Any],
            found: list[int],
            marker: Any,
            m0: int,
        ) -> list[Any]:
            nonlocal seq, ncalls, ovh, own_bytes
            cseq = seq
            seq += 1
            ncalls += 1
            parent = stack[-1][SEQ] if stack else -1
            rec = [
                cseq, name, parent, site, len(stack), kind, 0, 0, 0, 0, nhi * 256 + nskip, 0,
                ncalls, 0, 0, args_out, None, lib, marker, 0, 0, 0, 0,
            ]  # fmt: skip
            calls.append(rec)
            if not ncalls & 0x3F and freeze_gc:
                gc_freeze()  # keep the growing records out of every GC pass (see start())
            for vseq in found:
                uses.append((vseq, cseq))
            if track_memory:
                cur, peak = get_mem()
                own_bytes += cur - m0
                rec[OWN0] = own_bytes
                reset_peak()
                if stack:
                    top = stack[-1]
                    if peak > top[PEAK]:
                        top[PEAK] = peak
                rec[CUR0] = rec[PEAK] = cur
            stack.append(rec)
            if per_call and kind != KIND_PY:
                if tm_tracing():  # nested in another C call's session: net growth only
                    rec[CUR0] = get_mem()[0]
                else:
                    rec[CUR0] = -1
                    tm_start(1)
            t0 = perf()
            ovh += t0 - h0
            rec[T0] = t0
            rec[OV0] = ovh
            return rec

        def leave(t1: int, rec: list[Any], result: Any, returned: bool) -> None:
            nonlocal ovh, own_bytes
            if per_call:
                if rec[KIND] == KIND_PY:  # implied by the callees (see memory_mode)
                    mem, net = rec[PEAK], rec[OWN0]
                elif rec[CUR0] == -1:
                    net, mem = get_mem()
                    tm_stop()
                else:
                    net = mem = max(0, get_mem()[0] - rec[CUR0])
                rec[MEM] = mem
            m0 = get_mem()[0] if track_memory else 0
            rec[T1] = t1
            rec[OV1] = ovh
            rec[SKIP1] = nhi * 256 + nskip
            rec[N1] = ncalls
            rec[FRAME] = None
            if stack and stack[-1] is rec:
                stack.pop()
            elif any(r is rec for r in stack):
                while stack.pop() is not rec:
                    pass
            if track_memory:
                peak = max(rec[PEAK], get_mem()[1])
                rec[MEM] = max(0, peak - rec[CUR0] - (own_bytes - rec[OWN0]))
                if stack and peak > stack[-1][PEAK]:
                    stack[-1][PEAK] = peak
            elif per_call and stack:
                parent = stack[-1]
                if parent[OWN0] + mem > parent[PEAK]:
                    parent[PEAK] = parent[OWN0] + mem
                parent[OWN0] += net
            if returned and result is not None:
                cls = type(result)
                if is_data(cls) or (
                    (cls is tuple or cls is list or cls is dict) and has_data(result, is_data)
                ):
                    entry = lookup(result)
                    vseq = new_value(result, entry[2] + 1 if entry is not None else 0)
                    produces.append((rec[SEQ], vseq))
                    if cls is tuple or cls is list:
                        for item in result[:max_scan]:
                            if is_data(type(item)) and lookup(item) is None:
                                produces.append((rec[SEQ], new_value(item, 0)))
                    rec[RET] = (ARG_VALUE, vseq)
                elif cls in scalars:
                    rec[RET] = (ARG_SCALAR, result)
                else:
                    rec[RET] = (ARG_TYPE, cls)
            if track_memory:
                own_bytes += get_mem()[0] - m0
            ovh += perf() - t1

        def profile(frame: types.FrameType, event: str, arg: Any) -> None:
            nonlocal nskip, nhi, ovh
            try:
                if event == "call":
                    code = frame.f_code
                    info = code_cache.get(code, False)
                    if info is False:  # first sight: classification time is tracer time
                        c0 = perf()
                        info = classify_code(code, frame)
                        ovh += perf() - c0
                    if info is None or importing or info is IMPORT:
                        if info is IMPORT:
                            importing.append(frame)
                        nskip += 1
                        if nskip > 255:  # small ints are cached: no allocation
                            nskip, nhi = 0, nhi + 1
                        return
                    if stack and (
                        (info[1] is not None and stack[-1][LIB] == info[1])
                        or len(stack) >= max_depth
                    ):
                        nskip += 1
                        if nskip > 255:  # small ints are cached: no allocation
                            nskip, nhi = 0, nhi + 1
                        return
                    h0 = perf()
                    m0 = get_mem()[0] if track_memory else 0
                    args_out: list[Any] = []
                    found: list[int] = []
                    params = info[2]
                    if params:
                        local = frame.f_locals
                        scan = scan_arg if info[1] is None else scan_library_arg
                        for pname in params:
                            value = local.get(pname)
                            if type(value) in scalars:  # the common case, inlined
                                args_out.append((pname, ARG_SCALAR, value))
                            else:
                                scan(pname, value, args_out, found)
                    back = frame.f_back
                    site = (back.f_code, back.f_lasti) if back is not None else None
                    rec = enter(h0, info[0], info[1], KIND_PY, site, args_out, found, frame, m0)
                    if info[1] is not None:
                        rec[INFO] = info[3]  # the parameter layout, to name the arguments
                elif event == "return":
                    if importing:
                        if importing[-1] is frame:
                            importing.pop()
                        nskip += 1
                        if nskip > 255:  # small ints are cached: no allocation
                            nskip, nhi = 0, nhi + 1
                        return
                    if stack and stack[-1][FRAME] is frame:
                        leave(perf(), stack[-1], arg, True)
                    else:
                        nskip += 1
                        if nskip > 255:  # small ints are cached: no allocation
                            nskip, nhi = 0, nhi + 1
                        if code_cache.get(frame.f_code) and any(r[FRAME] is frame for r in stack):
                            t1 = perf()
                            for rec in [r for r in stack if r[FRAME] is frame]:
                                leave(t1, rec, arg, True)
                elif event == "c_call":
                    owner = getattr(arg, "__self__", None)
                    if owner is None or type(owner) is module_type:
                        info = c_cache.get(arg, False)
                        if info is False:
                            c0 = perf()
                            info = c_cache[arg] = classify_c(arg)
                            ovh += perf() - c0
                    else:  # a bound method: cached per class (the class itself for classmethods)
                        owner_type = owner if isinstance(owner, type) else type(owner)
                        per_type = bound_cache.get(owner_type)
                        if per_type is None:
                            per_type = bound_cache[owner_type] = {}
                        info = per_type.get(arg.__name__, False)
                        if info is False:
                            c0 = perf()
                            info = per_type[arg.__name__] = classify_c(arg)
                            ovh += perf() - c0
                    if info is None or importing:
                        nskip += 1
                        if nskip > 255:  # small ints are cached: no allocation
                            nskip, nhi = 0, nhi + 1
                        return
                    if stack and (stack[-1][LIB] == info[1] or len(stack) >= max_depth):
                        nskip += 1
                        if nskip > 255:  # small ints are cached: no allocation
                            nskip, nhi = 0, nhi + 1
                        return
                    h0 = perf()
                    m0 = get_mem()[0] if track_memory else 0
                    site = (frame.f_code, frame.f_lasti)
                    enter(h0, info[0], info[1], KIND_C, site, [], [], arg, m0)
                elif stack and stack[-1][FRAME] is arg:  # c_return / c_exception
                    leave(perf(), stack[-1], None, False)
                else:
                    nskip += 1
                    if nskip > 255:  # small ints are cached: no allocation
                        nskip, nhi = 0, nhi + 1
            except Exception as error:  # never let the hook raise: Python would drop it
                fail(error)

        def fail(error: Exception) -> None:
            session.error = f"{type(error).__name__}: {error}"
            session.broken = True
            sys.setprofile(None)
            log.error("tracer failed (%s); tracing stopped early", session.error, exc_info=error)

        def call_wrapped(
            name: str, lib: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            if (
                session.broken
                or importing
                or (stack and (stack[-1][LIB] == lib or len(stack) >= max_depth))
            ):
                return fn(*args, **kwargs)
            # The bookkeeping below runs outside the profile callback, so the interpreter would
            # report every helper call to the hook: switch the hook off around it.
            own = get_profile() is profile
            if own:  # first, so that the calls below raise no events
                set_profile(None)
            try:
                h0 = perf()
                m0 = get_mem()[0] if track_memory else 0
                args_out: list[Any] = []
                found: list[int] = []
                for i, value in enumerate(args):
                    scan_library_arg(i, value, args_out, found)
                for key, value in kwargs.items():
                    scan_library_arg(key, value, args_out, found)
                caller = sys._getframe(2)
                site = (caller.f_code, caller.f_lasti)
                rec = enter(h0, name, lib, KIND_WRAPPED, site, args_out, found, args, m0)
            except Exception as error:  # a tracer bug must never break the traced code
                fail(error)  # leaves the hook off
                return fn(*args, **kwargs)
            if own:
                set_profile(profile)
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                if own:
                    set_profile(None)
                t1 = perf()
                with contextlib.suppress(Exception):
                    leave(t1, rec, None, False)
                if own and not session.broken:
                    set_profile(profile)
                raise
            if own:
                set_profile(None)
            t1 = perf()
            try:
                leave(t1, rec, result, True)
            except Exception as error:
                fail(error)
            if own and not session.broken:
                set_profile(profile)
            return result

        def counters() -> tuple[int, int, int]:
            return nhi * 256 + nskip, ncalls, ovh

        def close_open(t_stop: int) -> None:
            while stack:
                leave(t_stop, stack[-1], None, False)

        self.profile = profile
        self.call_wrapped = call_wrapped
        self.counters = counters
        self.close_open = close_open

    # ------------------------------------------------------------------ window
    def start(self) -> None:
        """Make this the active session and install the profile hook on this thread."""
        global _active
        _register_fork_handler()
        with _active_lock:
            self._previous_active = _active
            _active = self
        self._previous_profile = sys.getprofile()
        self.t_start_ns = time.perf_counter_ns()
        sys.setprofile(self.profile)

    def stop(self) -> None:
        """Restore the previous profile hook and active session; close unfinished records."""
        global _active
        sys.setprofile(self._previous_profile)
        self.t_stop_ns = time.perf_counter_ns()
        with _active_lock:
            _active = self._previous_active
        self.close_open(self.t_stop_ns)
        if self.broken and self.memory_mode == MEMORY_PER_CALL and tracemalloc.is_tracing():
            tracemalloc.stop()  # a failure may have left a per-call session open
        if self.freeze_gc:
            gc.unfreeze()
        self.live.clear()


_fork_handler_registered = False


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) inherits the hook of the forking thread: drop it."""
    global _active
    if _active is not None:
        _active = None
        sys.setprofile(None)


def _register_fork_handler() -> None:
    global _fork_handler_registered
    if not _fork_handler_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_handler_registered = True
