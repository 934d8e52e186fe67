"""Call records: opening and closing them, the tracer's own time around each, the values a call
uses and produces, and pruning functions that never touch data."""

from __future__ import annotations

import numpy as np
from trace_core import TICK_NS, TickClock, core_session, finished_frame

from codedag.trace.calls import CallRecorder
from codedag.trace.capture import ArgumentCapture
from codedag.trace.classify import Classifications, Classifier
from codedag.trace.costs import Meter, PerCallMemory
from codedag.trace.filter import FunctionFilter
from codedag.trace.identity import ValueTracker
from codedag.trace.lines import LineFollower
from codedag.trace.records import (
    ARG_SCALAR,
    ARG_VALUE,
    ARGS,
    DEPTH,
    FRAME,
    KIND_C,
    KIND_PY,
    MEM,
    N0,
    N1,
    NAME,
    OV0,
    OV1,
    PARENT,
    RET,
    SEQ,
    SKIP0,
    SKIP1,
    T0,
    T1,
)
from codedag.trace.session_state import SessionState
from codedag.trace.steps import StepMaker
from codedag.trace.value_nodes import DataTypes


def test_a_record_times_the_call_and_the_tracers_own_work_around_it() -> None:
    s = core_session()
    rec = s.recorder.enter(s.meter.clock(), "lib.f", "lib", KIND_C, None, [], [], len, 0)
    assert rec[T0] == 2 * TICK_NS and rec[OV0] == TICK_NS  # one tick between h0 and t0
    s.meter.skipped += 3
    s.recorder.leave(s.meter.clock(), rec, None, False)
    assert rec[T1] == 3 * TICK_NS
    assert rec[OV1] == TICK_NS  # the overhead when the call ended, before its own closing
    assert s.meter.overhead_ns == 2 * TICK_NS  # closing is charged too
    assert (rec[SKIP0], rec[SKIP1], rec[N0], rec[N1]) == (0, 3, 1, 1)
    assert s.stack == [] and rec[FRAME] is None


def test_nested_records_know_their_parent_and_depth_and_share_the_numbering() -> None:
    s = core_session()
    outer = s.recorder.enter(s.meter.clock(), "f", None, KIND_PY, None, [], [], "a", 0)
    inner = s.recorder.enter(s.meter.clock(), "g", "lib", KIND_C, None, [], [], "b", 0)
    assert (outer[SEQ], outer[PARENT], outer[DEPTH]) == (0, -1, 0)
    assert (inner[SEQ], inner[PARENT], inner[DEPTH]) == (1, 0, 1)
    assert s.stack == [outer, inner]
    # closing the outer one first (an event was missed) closes the inner one with it
    s.recorder.leave(s.meter.clock(), outer, None, False)
    assert s.stack == [] and inner[T1] == outer[T1] > inner[T0]


def test_a_c_method_of_a_data_value_uses_it_and_its_new_result_is_produced() -> None:
    s = core_session()
    image = np.zeros((2, 3), np.uint8)
    frame = finished_frame(image)
    s.recorder.record_c(frame, image.astype, ("numpy.ndarray.astype", "numpy"), image)
    rec = s.calls[0]
    assert rec[ARGS][0][:2] == ("self", ARG_VALUE)
    used = rec[ARGS][0][2]
    assert s.uses == [(used, rec[SEQ])]
    result = image.astype(np.float32)
    s.recorder.c_returned(image.astype)  # another bound method object: not this record
    assert s.stack == [rec] and s.meter.skipped == 1
    s.recorder.leave(s.meter.clock(), rec, result, True)
    produced = rec[RET][1]
    assert rec[RET][0] == ARG_VALUE and produced != used
    assert s.produces == [(rec[SEQ], produced)]


def test_a_c_function_returning_its_argument_makes_a_new_version() -> None:
    s = core_session()
    image = np.zeros((2, 2))
    first = s.tracker.new_value(image, 0)
    rec = s.recorder.enter(s.meter.clock(), "cv2.rectangle", "cv2", KIND_C, None, [], [], 1, 0)
    s.recorder.leave(s.meter.clock(), rec, image, True)
    entry = s.tracker.lookup(image)
    assert entry[1] == rec[RET][1] != first and entry[2] == 1  # version 1 of the same object


def test_a_python_function_returning_what_it_holds_keeps_the_value_node() -> None:
    s = core_session()
    image = np.zeros((2, 2))
    held = s.tracker.new_value(image, 0)
    rec = s.recorder.enter(s.meter.clock(), "user.f", None, KIND_PY, None, [], [], "fr", 0)
    s.recorder.leave(s.meter.clock(), rec, image, True)
    assert rec[RET] == (ARG_VALUE, held)
    assert s.produces == []  # made before the call: not produced by it


def test_a_python_function_returning_a_resized_array_makes_a_new_version() -> None:
    s = core_session()
    image = np.zeros((2, 2))
    held = s.tracker.new_value(image, 0)
    rec = s.recorder.enter(s.meter.clock(), "user.f", None, KIND_PY, None, [], [], "fr", 0)
    image.resize((4,), refcheck=False)
    s.recorder.leave(s.meter.clock(), rec, image, True)
    assert rec[RET][1] != held and s.tracker.lookup(image)[2] == 1


def test_the_data_values_of_a_returned_tuple_are_produced_and_scalars_are_kept() -> None:
    s = core_session()
    a, b = np.zeros(2), np.ones(2)
    rec = s.recorder.enter(s.meter.clock(), "lib.split", "lib", KIND_C, None, [], [], 1, 0)
    s.recorder.leave(s.meter.clock(), rec, (a, b), True)
    produced = [v for c, v in s.produces if c == rec[SEQ]]
    assert s.tracker.lookup(a)[1] in produced and s.tracker.lookup(b)[1] in produced
    other = s.recorder.enter(s.meter.clock(), "lib.size", "lib", KIND_C, None, [], [], 2, 0)
    s.recorder.leave(s.meter.clock(), other, 7, True)
    assert other[RET] == (ARG_SCALAR, 7)


def test_record_py_reads_the_parameters_from_the_frame() -> None:
    s = core_session()
    image = np.zeros(3)
    frame = finished_frame(image, 5)
    info = ("tests.user_step", None, ("image", "k"), None)
    s.recorder.record_py(frame, frame.f_code, info)
    rec = s.calls[0]
    assert rec[NAME] == "tests.user_step"
    assert rec[ARGS][0][:2] == ("image", ARG_VALUE)
    assert rec[ARGS][1] == ("k", ARG_SCALAR, 5)
    assert frame in s.recorder.open_frames
    s.recorder.returned(frame, None)
    assert s.stack == [] and frame not in s.recorder.open_frames


def test_a_function_that_never_touches_data_is_pruned_after_its_calls() -> None:
    s = core_session(prune_after=2)
    frame = finished_frame(1, 2)
    code = frame.f_code
    info = ("tests.user_step", None, ("image", "k"), None)
    s.classifier.code_cache[id(code)] = info
    for _ in range(2):
        s.recorder.record_py(frame, code, info)
        s.recorder.returned(frame, 7)
    assert s.classifier.code_cache[id(code)] is None
    assert s.pruned == ["tests.user_step"]


def test_a_function_that_returned_data_once_is_never_pruned() -> None:
    s = core_session(prune_after=1)
    frame = finished_frame(1, 2)
    code = frame.f_code
    info = ("tests.user_step", None, ("image", "k"), None)
    s.classifier.code_cache[id(code)] = info
    s.recorder.record_py(frame, code, info)
    s.recorder.returned(frame, np.zeros(2))
    for _ in range(3):
        s.recorder.record_py(frame, code, info)
        s.recorder.returned(frame, None)
    assert s.classifier.code_cache[id(code)] == info and s.pruned == []


def test_unwinding_a_frame_closes_the_records_opened_inside_it() -> None:
    s = core_session()
    frame = finished_frame(0)
    info = ("tests.user_step", None, (), None)
    s.recorder.record_py(frame, frame.f_code, info)
    inner = s.recorder.enter(s.meter.clock(), "lib.g", "lib", KIND_PY, None, [], [], "x", 0)
    s.recorder.returned(frame, None)  # not on top: counted as skipped, then unwound
    assert s.stack == [] and s.meter.skipped == 1
    assert inner[T1] > inner[T0] and inner[FRAME] is None  # closed, not just dropped


def test_closing_the_window_closes_every_open_record_at_its_stop_time() -> None:
    s = core_session()
    for name in ("a", "b", "c"):
        s.recorder.enter(s.meter.clock(), name, None, KIND_PY, None, [], [], name, 0)
    s.recorder.close_open(12_345)
    assert s.stack == [] and [r[T1] for r in s.calls] == [12_345] * 3


def test_a_recorder_built_from_its_parts_measures_each_c_calls_memory() -> None:
    state = SessionState(FunctionFilter(), 8, track_memory=True)
    meter = Meter(TickClock())
    tracker = ValueTracker(state.values, state.sequence, DataTypes())
    classifier = Classifier(Classifications(FunctionFilter()), meter)
    lines = LineFollower(state, meter, StepMaker(state, tracker, classifier.skipped))
    recorder = CallRecorder(
        state, meter, tracker, ArgumentCapture(tracker), classifier, PerCallMemory(), lines
    )
    frame = finished_frame(0)
    recorder.record_c(frame, np.ones, ("numpy.ones", "numpy"), None)
    made = np.ones(1 << 16, np.uint8)  # 64 KiB allocated inside the call
    recorder.c_returned(np.ones)
    (rec,) = state.calls
    assert rec[MEM] >= made.nbytes and state.stack == []
    assert rec[T1] > rec[T0]
