"""The tracer's event source on Python 3.11: the ``sys.setprofile`` hook.

The hook runs for every call, return, C call and C return of the traced thread, so it is a
closure over its collaborators' bound methods and tables (closure cells are the cheapest state
CPython offers a Python-level hook): it looks the code object or C function up (one dictionary
lookup), skips what the filter and the stack rule out with a counter increment, and hands the
rest to the :class:`~codedag.trace.calls.CallRecorder`. A recording wrapper's frame
(:mod:`codedag.trace.interpose`) is recorded as the library call it stands for, and the call of
the original inside it is skipped. Statements of user frames are followed by a local trace
function (:mod:`codedag.trace.lines`) under the global :func:`no_trace`.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from codedag.trace.calls import CallRecorder
from codedag.trace.classify import WRAPPER, Classifier
from codedag.trace.costs import Meter
from codedag.trace.records import FRAME, IMPORT, KIND, KIND_WRAPPED, LIB
from codedag.trace.session_state import SessionState, no_trace

__all__ = ["ProfileHook", "make_profile_hook", "no_trace"]

ProfileHook = Callable[[types.FrameType, str, Any], None]


def make_profile_hook(
    state: SessionState, meter: Meter, classifier: Classifier, recorder: CallRecorder
) -> ProfileHook:
    """The ``sys.setprofile`` function of one window."""
    stack, importing, max_depth, fail = state.stack, state.importing, state.max_depth, state.fail
    code_cache, c_cache = classifier.code_cache, classifier.c_cache
    classify_code, classify_c = classifier.code, classifier.c_function
    record_py, record_wrapped, record_c = (
        recorder.record_py,
        recorder.record_wrapped,
        recorder.record_c,
    )
    leave, returned, open_frames = recorder.leave, recorder.returned, recorder.open_frames
    clock = meter.clock
    module_type = types.ModuleType

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        try:
            if event == "call":
                code = frame.f_code
                info = code_cache.get(id(code), False)
                if info is False:  # first sight in this window
                    info = classify_code(code, frame)
                if info is None or importing or info is IMPORT:
                    if info is IMPORT:
                        importing.append(frame)
                    meter.skipped += 1
                elif stack and (
                    (info[1] is not None and stack[-1][LIB] == info[1]) or len(stack) >= max_depth
                ):
                    meter.skipped += 1
                elif info[3] is WRAPPER:
                    record_wrapped(frame, info)
                else:
                    record_py(frame, code, info)
            elif event == "return":
                if stack and stack[-1][FRAME] is frame and not importing:
                    leave(clock(), stack[-1], arg, True)
                elif importing or frame in open_frames:
                    returned(frame, arg)
                else:
                    meter.skipped += 1
            elif event == "c_call":
                if stack and stack[-1][FRAME] is frame and stack[-1][KIND] == KIND_WRAPPED:
                    meter.skipped += 1  # the original, called by its recording wrapper
                    return
                owner = getattr(arg, "__self__", None)
                if owner is None or type(owner) is module_type:
                    info = c_cache.get(arg, False)
                    if info is False:
                        info = classify_c(arg, owner)
                else:
                    info = classify_c(arg, owner)
                if (
                    info is None
                    or importing
                    or (stack and (stack[-1][LIB] == info[1] or len(stack) >= max_depth))
                ):
                    meter.skipped += 1
                else:
                    record_c(frame, arg, info, owner)
            elif stack and stack[-1][FRAME] is arg:  # c_return / c_exception
                leave(clock(), stack[-1], None, False)
            else:
                meter.skipped += 1
        except Exception as error:  # never let the hook raise: Python would drop it
            fail(error)

    return profile
