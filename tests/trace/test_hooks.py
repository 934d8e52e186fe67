"""The ``sys.setprofile`` hook, driven event by event: what it records, what it skips, and that
it never raises into the traced code."""

from __future__ import annotations

import sys

import numpy as np
from trace_core import core_session, finished_frame

from codedag.trace.hooks import make_profile_hook
from codedag.trace.records import ARG_VALUE, FRAME, KIND, KIND_C, KIND_PY, NAME, RET


def test_a_user_call_and_its_return_make_one_closed_record() -> None:
    s = core_session()
    frame = finished_frame(np.zeros(3))
    s.profile(frame, "call", None)
    assert len(s.calls) == 1 and s.calls[0][KIND] == KIND_PY
    assert s.calls[0][NAME].endswith("user_step")
    result = np.ones(2)
    s.profile(frame, "return", result)
    assert s.stack == [] and s.calls[0][RET][0] == ARG_VALUE
    assert s.tracker.lookup(result)[1] == s.calls[0][RET][1]


def test_a_library_c_call_is_recorded_and_closed_by_its_c_return() -> None:
    s = core_session()
    frame = finished_frame(0)
    s.profile(frame, "c_call", np.add)
    assert [r[NAME] for r in s.calls] == ["numpy.add"] and s.calls[0][KIND] == KIND_C
    s.profile(frame, "c_return", np.add)
    assert s.stack == [] and s.calls[0][FRAME] is None


def test_calls_past_the_depth_limit_or_inside_the_same_library_are_skipped() -> None:
    s = core_session(max_depth=1)
    outer = finished_frame(0)
    s.profile(outer, "call", None)
    s.profile(finished_frame(1), "call", None)  # depth 1: past the limit
    assert len(s.calls) == 1 and s.meter.skipped == 1
    s.profile(outer, "return", None)

    s = core_session()
    s.profile(outer, "c_call", np.add)
    s.profile(outer, "c_call", np.multiply)  # numpy inside numpy: the library's own business
    assert len(s.calls) == 1 and s.meter.skipped == 1


def test_nothing_is_recorded_while_a_module_body_runs() -> None:
    s = core_session()
    namespace: dict = {}
    exec(compile("import sys\nframe = sys._getframe()", "<imported>", "exec"), namespace)
    body = namespace["frame"]
    s.profile(body, "call", None)
    assert s.importing == [body]
    s.profile(finished_frame(0), "call", None)
    s.profile(body, "c_call", np.add)
    assert s.calls == [] and s.meter.skipped == 3
    s.profile(body, "return", None)
    assert s.importing == []


def test_an_internal_error_stops_tracing_instead_of_reaching_the_traced_code() -> None:
    s = core_session()
    hook = make_profile_hook(s, s.meter, s.classifier, s.recorder)
    hook(object(), "call", None)  # type: ignore[arg-type]  # no f_code: the hook fails
    assert s.broken and s.error is not None and s.error.startswith("AttributeError")
    assert sys.getprofile() is None
