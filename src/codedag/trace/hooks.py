"""The tracer's hooks: closures over one session's raw records, counters and value table.

Everything a recorded event touches lives in local variables of :func:`make_hooks` (closure
cells are the cheapest state CPython offers to a Python-level hook). Events come from one of two
sources, both feeding the same handlers (``record_py``, ``py_return``, ``record_c``,
``c_return``, ``line``):

- Python 3.11: ``sys.setprofile`` (calls, returns, C calls) and, for line-level dataflow,
  ``sys.settrace`` with a local trace function on user frames only;
- Python 3.12+: ``sys.monitoring`` (PEP 669, :mod:`codedag.trace.monitoring`), where code the
  tracer never records is switched off per code location (``DISABLE``) and costs nothing after
  its first event, and line events are enabled only for user code objects.

Library wrappers report through ``call_wrapped``. Nothing here builds graph objects: records are
small lists (:mod:`codedag.trace.records`) that the builder turns into a DAG after the window.
The hooks time their own work around every recorded event (two ``perf_counter_ns`` reads) so it
can be subtracted; skipped events only increment a counter.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import sys
import tracemalloc
import types
import weakref
from typing import Any

from codedag.trace.args import kept_object, small_bytes
from codedag.trace.lines import make_line_follower
from codedag.trace.monitoring import EventHandlers, monitoring_callbacks
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    CUR0,
    DATA,
    DEPTH,
    FRAME,
    IMPORT,
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_WRAPPED,
    LIB,
    LINES,
    MAX_ITEMS,
    MAX_NESTING,
    MEM,
    MEMORY_PER_CALL,
    MEMORY_WINDOW,
    N1,
    NAME,
    NL1,
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
from codedag.trace.session_state import SessionState
from codedag.trace.statements import statements_of
from codedag.trace.steps import (
    StepMaker,
)
from codedag.trace.values import MAX_CONTAINER_SCAN, SCALARS, describe

log = logging.getLogger(__name__)


def no_trace(frame: types.FrameType, event: str, arg: Any) -> None:
    """The global trace function during line-level tracing on 3.11: frames get none here.

    ``sys.settrace`` must be set for line events to reach the local trace function the profile
    hook gives user frames (``frame.f_trace``); every other frame gets none.
    """
    return None


def make_hooks(session: SessionState) -> None:
    """Build the session's hooks: closures over its record lists and counters (see module doc)."""
    monitoring: Any = vars(sys).get("monitoring")  # Python 3.12+
    calls, values, uses, produces = session.calls, session.values, session.uses, session.produces
    stack, live = session.stack, session.live
    code_cache: dict[types.CodeType, Any] = {}
    c_cache: dict[Any, Any] = {}
    bound_cache: dict[type, dict[str, Any]] = {}
    session.code_cache = code_cache
    classify_code, classify_c = session._classify_code, session._classify_c
    is_data = session.data_types.is_data
    data_cache = session.data_types._cache
    perf = session.clock
    max_depth = session.max_depth
    track_memory = session.memory_mode == MEMORY_WINDOW  # the whole-window measurement
    per_call = session.memory_mode == MEMORY_PER_CALL
    get_mem, reset_peak = tracemalloc.get_traced_memory, tracemalloc.reset_peak
    tm_start, tm_stop, tm_tracing = tracemalloc.start, tracemalloc.stop, tracemalloc.is_tracing
    module_type = types.ModuleType
    weak_ref = weakref.ref
    partial = functools.partial
    weakrefable: dict[type, bool] = {}
    scalars = frozenset(SCALARS)
    max_scan = MAX_CONTAINER_SCAN
    max_items, max_nesting = MAX_ITEMS, MAX_NESTING
    gc_freeze = gc.freeze
    get_profile, set_profile = sys.getprofile, sys.setprofile
    set_trace = sys.settrace
    freeze_gc = session.freeze_gc

    importing: list[types.FrameType] = []  # module bodies running: nothing is recorded
    seq = 0
    nskip = 0  # skipped events = nhi * 256 + nskip
    nhi = 0
    own_bytes = 0  # traced memory the tracer itself allocated
    ncalls = 0
    ovh = 0
    nline = 0  # line events of user frames (line-level dataflow)
    line_level = session.line_level
    statement_cache: dict[types.CodeType, Any] = {}
    prune_after = session.prune_after
    idle_lines = session.idle_lines or sys.maxsize
    code_stats: dict[types.CodeType, list[Any]] = {}  # [recorded calls, touched data]

    def forget(key: int, ref: weakref.ref[Any]) -> None:  # called when a tracked value dies
        entry = live.get(key)
        if entry is not None and entry[0] is ref:
            del live[key]

    def hold(obj: Any, vseq: int, version: int, shape: Any = None) -> None:
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
        live[key] = (ref, vseq, version, shape)

    def lookup(obj: Any) -> tuple[Any, int, int, Any] | None:
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
        hold(obj, vseq, version, shape)
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
            ncalls, 0, 0, args_out, None, lib, marker, 0, 0, 0, 0, None, nline, 0, bool(found),
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
        rec[NL1] = nline
        if rec[KIND] == KIND_PY and prune_after:
            touched_data(rec, result if returned else None)
        rec[FRAME] = None
        rec[LINES] = None
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
                cseq = rec[SEQ]
                if (
                    entry is None
                    or rec[KIND] != KIND_PY
                    or entry[3] != describe(result)[2]  # resized in place (resize_)
                ):
                    # new, or returned again by a C function (which may have written into
                    # it: cv2.rectangle): a new version
                    vseq = new_value(result, entry[2] + 1 if entry is not None else 0)
                    produces.append((cseq, vseq))
                else:
                    # a Python function returns what it already holds: the same value
                    # node; produced by this call if made inside it (helpers keep chains)
                    vseq = entry[1]
                    if vseq > cseq:
                        produces.append((cseq, vseq))
                if cls is tuple or cls is list:
                    for item in result[:max_scan]:
                        if is_data(type(item)):
                            held = lookup(item)
                            if held is None:
                                produces.append((cseq, new_value(item, 0)))
                            elif held[3] != describe(item)[2]:  # changed shape in place
                                produces.append((cseq, new_value(item, held[2] + 1)))
                            elif held[1] > cseq and rec[KIND] == KIND_PY:
                                produces.append((cseq, held[1]))
                rec[RET] = (ARG_VALUE, vseq)
            elif cls in scalars:
                rec[RET] = (ARG_SCALAR, result)
            else:
                rec[RET] = (ARG_TYPE, cls)
        if track_memory:
            own_bytes += get_mem()[0] - m0
        ovh += perf() - t1

    def touched_data(rec: list[Any], result: Any) -> None:
        """Count a finished Python call; stop recording functions that never touch data.

        A function recorded ``prune_after`` times whose calls never received or returned a data
        value, made a step or called anything that did (tokenizers, parsers, small helpers)
        is skipped for the rest of the window: its time stays in its callers' self time. On
        Python 3.12+ its events are then switched off where they happen.
        """
        data = rec[DATA]
        if not data and result is not None:
            cls = type(result)
            data = is_data(cls) or (cls in (tuple, list, dict) and has_data(result, is_data))
        if data:
            for parent in stack:  # every caller on the stack led to data
                parent[DATA] = True
        frame = rec[FRAME]
        code = frame.f_code if frame is not None else None
        if code is None:
            return
        stats = code_stats.get(code)
        if stats is None:
            stats = code_stats[code] = [0, False]
        stats[0] += 1
        if data:
            stats[1] = True
        elif stats[0] >= prune_after and not stats[1]:
            code_cache[code] = None
            session.pruned.append(rec[NAME])
            if code in line_codes:  # its statements are not followed any more either
                monitoring.set_local_events(session.monitoring_tool, code, 0)
                line_codes.discard(code)

    def skip() -> None:
        nonlocal nskip, nhi
        nskip += 1
        if nskip > 255:
            nskip, nhi = 0, nhi + 1

    def frame_info(code: types.CodeType, frame: types.FrameType) -> Any:
        nonlocal ovh
        info = code_cache.get(code, False)
        if info is False:  # first sight: classification time is tracer time
            c0 = perf()
            info = classify_code(code, frame)
            ovh += perf() - c0
        return info

    def record_py(frame: types.FrameType, code: types.CodeType, info: Any, h0: int = 0) -> None:
        """A Python call that passed the filter and the stack checks: record it (the tracer's
        time counts from ``h0`` when given)."""
        nonlocal ovh
        h0 = h0 or perf()
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
        elif line_level and rec[DEPTH] < max_depth - 1:
            code_statements = statement_cache.get(code)
            if code_statements is None:
                c0 = perf()
                code_statements = statement_cache[code] = statements_of(code)
                ovh += perf() - c0
            if code_statements.by_line:
                rec[LINES] = [code_statements, None, 0, 0, 0, 0, 0, 0, None, 0, False]
                follow_lines(frame, code)

    def py_return(frame: types.FrameType, arg: Any, h0: int = 0) -> None:
        """A Python frame returns (or yields, or unwinds with ``arg`` None)."""
        if importing:
            if importing[-1] is frame:
                importing.pop()
            skip()
            return
        if stack and stack[-1][FRAME] is frame:
            leave(h0 or perf(), stack[-1], arg, True)
            return
        skip()
        if code_cache.get(frame.f_code) and any(r[FRAME] is frame for r in stack):
            t1 = perf()
            for rec in [r for r in stack if r[FRAME] is frame]:
                leave(t1, rec, arg, True)

    def c_info(func: Any, owner: Any) -> Any:
        nonlocal ovh
        if owner is None or type(owner) is module_type:
            info = c_cache.get(func, False)
            if info is False:
                c0 = perf()
                info = c_cache[func] = classify_c(func)
                ovh += perf() - c0
            return info
        # a bound method: cached per class (the class itself for classmethods)
        owner_type = owner if isinstance(owner, type) else type(owner)
        per_type = bound_cache.get(owner_type)
        if per_type is None:
            per_type = bound_cache[owner_type] = {}
        name = str(getattr(func, "__name__", ""))
        info = per_type.get(name, False)
        if info is False:
            c0 = perf()
            info = per_type[name] = classify_c(func)
            ovh += perf() - c0
        return info

    def record_c(frame: types.FrameType, func: Any, info: Any, owner: Any, h0: int = 0) -> None:
        """A C function that passed the filter and the stack checks: record it."""
        h0 = h0 or perf()
        m0 = get_mem()[0] if track_memory else 0
        site = (frame.f_code, frame.f_lasti)
        c_args: list[Any] = []
        c_found: list[int] = []
        if owner is not None and (data_cache.get(type(owner)) or is_data(type(owner))):
            # a method of a data value (img.astype): it reads its receiver
            c_args.append(("self", ARG_VALUE, use(owner, c_found)))
        enter(h0, info[0], info[1], KIND_C, site, c_args, c_found, func, m0)

    def c_return(func: Any, h0: int = 0) -> None:
        if stack and stack[-1][FRAME] is func:
            leave(h0 or perf(), stack[-1], None, False)
        else:
            skip()

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        """The ``sys.setprofile`` hook (Python 3.11)."""
        nonlocal nskip, nhi
        try:
            if event == "call":
                code = frame.f_code
                info = frame_info(code, frame)
                if info is None or importing or info is IMPORT:
                    if info is IMPORT:
                        importing.append(frame)
                    nskip += 1
                    if nskip > 255:  # small ints are cached: no allocation
                        nskip, nhi = 0, nhi + 1
                    return
                if stack and (
                    (info[1] is not None and stack[-1][LIB] == info[1]) or len(stack) >= max_depth
                ):
                    nskip += 1
                    if nskip > 255:
                        nskip, nhi = 0, nhi + 1
                    return
                record_py(frame, code, info)
            elif event == "return":
                py_return(frame, arg)
            elif event == "c_call":
                owner = getattr(arg, "__self__", None)
                info = c_info(arg, owner)
                if (
                    info is None
                    or importing
                    or (stack and (stack[-1][LIB] == info[1] or len(stack) >= max_depth))
                ):
                    nskip += 1
                    if nskip > 255:
                        nskip, nhi = 0, nhi + 1
                    return
                record_c(frame, arg, info, owner)
            else:  # c_return / c_exception
                c_return(arg)
        except Exception as error:  # never let the hook raise: Python would drop it
            fail(error)

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq - 1

    def skipped(func: Any) -> bool:
        return classify_c(func) is None

    maker = StepMaker(
        calls, values, uses, produces, lookup, use, new_value, is_data, next_seq, skipped
    )
    finish, snapshot = maker.finish, maker.snapshot

    def current_seq() -> int:
        return seq

    def skip_count() -> int:
        return nhi * 256 + nskip

    def overhead() -> int:
        return ovh

    def line_count() -> int:
        return nline

    def count_line() -> None:
        nonlocal nline
        nline += 1

    def charge(h0: int, t: int = 0) -> int:
        """Add the time from ``h0`` to ``t`` (now) to the tracer's own; return the new total."""
        nonlocal ovh
        ovh += (t or perf()) - h0
        return ovh

    def fail(error: Exception) -> None:
        session.error = f"{type(error).__name__}: {error}"
        session.broken = True
        if session.monitoring_tool is None:
            sys.setprofile(None)
            if sys.gettrace() is no_trace:
                sys.settrace(None)
        # sys.monitoring callbacks check session.broken and do nothing from now on
        log.error("tracer failed (%s); tracing stopped early", session.error, exc_info=error)

    line_codes: set[types.CodeType] = set()
    lines = make_line_follower(
        session=session,
        stack=stack,
        calls=calls,
        statement_cache=statement_cache,
        line_codes=line_codes,
        idle_lines=idle_lines,
        finish=finish,
        snapshot=snapshot,
        fail=fail,
        counters=(current_seq, skip_count, overhead, line_count),
        count_line=count_line,
        charge=charge,
    )
    line, statement_returns, statement_failed = lines.line, lines.returns, lines.failed
    follow_lines = lines.follow_with_trace  # replaced by the sys.monitoring source on 3.12+

    # ------------------------------------------------------------------ sys.monitoring (3.12+)
    if session.use_monitoring:
        follow_lines = lines.follow_with_monitoring
        session.monitoring_callbacks = monitoring_callbacks(
            EventHandlers(
                session=session,
                stack=stack,
                importing=importing,
                code_cache=code_cache,
                max_depth=max_depth,
                line_level=line_level,
                perf=perf,
                frame_info=frame_info,
                record_py=record_py,
                py_return=py_return,
                c_info=c_info,
                record_c=record_c,
                c_return=c_return,
                line=line,
                statement_returns=statement_returns,
                statement_failed=statement_failed,
                skip=skip,
                fail=fail,
                count_line=count_line,
                charge=charge,
            )
        )
        session.line_codes = line_codes

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
            if line_level:
                set_trace(None)
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
            if line_level:
                set_trace(no_trace)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            if own:
                set_profile(None)
                if line_level:
                    set_trace(None)
            t1 = perf()
            with contextlib.suppress(Exception):
                leave(t1, rec, None, False)
            if own and not session.broken:
                set_profile(profile)
                if line_level:
                    set_trace(no_trace)
            raise
        if own:
            set_profile(None)
            if line_level:
                set_trace(None)
        t1 = perf()
        try:
            leave(t1, rec, result, True)
        except Exception as error:
            fail(error)
        if own and not session.broken:
            set_profile(profile)
            if line_level:
                set_trace(no_trace)
        return result

    def counters() -> tuple[int, int, int]:
        return nhi * 256 + nskip, ncalls, ovh

    def line_events() -> int:
        return nline

    def close_open(t_stop: int) -> None:
        while stack:
            rec = stack[-1]
            try:
                leave(t_stop, rec, None, False)
            except Exception as error:  # the window must close whatever happened
                fail(error)
                if stack and stack[-1] is rec:
                    stack.pop()

    session.profile = profile
    session.call_wrapped = call_wrapped
    session.counters = counters
    session.line_events = line_events
    session.close_open = close_open
