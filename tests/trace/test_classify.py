"""Classification: recording wrappers by code object, results shared by windows of one filter
and started afresh after an import, a window's own entries by code object id."""

from __future__ import annotations

import sys
import types

import pytest

from codedag.trace.classify import (
    WRAPPER,
    Classifications,
    Classifier,
    shared_classifications,
)
from codedag.trace.costs import Meter
from codedag.trace.filter import FunctionFilter
from codedag.trace.interpose import make_wrapper


def test_a_recording_wrapper_is_classified_as_the_function_it_wraps() -> None:
    wrapper = make_wrapper("cv2.resize", "cv2", abs)
    other = make_wrapper("cv2.flip", "cv2", abs)
    assert wrapper.__code__ is not other.__code__  # one code object each
    info = Classifications(FunctionFilter()).code(wrapper.__code__, sys._getframe())
    assert info == ("cv2.resize", "cv2", (), WRAPPER)
    assert wrapper(-3) == 3


def test_windows_of_one_filter_share_results_until_a_module_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = shared_classifications(FunctionFilter())
    assert shared_classifications(FunctionFilter()) is first
    assert shared_classifications(FunctionFilter(exclude=["mypkg"])) is not first
    monkeypatch.setitem(sys.modules, "codedag_test_new_module", types.ModuleType("x"))
    assert shared_classifications(FunctionFilter()) is not first


def test_a_window_keeps_its_own_entries_by_code_id() -> None:
    shared = Classifications(FunctionFilter())
    window, other = Classifier(shared, Meter()), Classifier(shared, Meter())
    code = test_a_window_keeps_its_own_entries_by_code_id.__code__
    info = window.code(code, sys._getframe())
    assert info is not None and info[1] is None  # user code
    assert window.code_cache[id(code)] is info and code in window.codes
    window.stop_recording(code)  # no longer recorded in this window only
    assert window.code_cache[id(code)] is None
    assert other.code(code, sys._getframe()) == info
    assert window.meter.overhead_ns > 0


def test_c_functions_by_module_and_bound_methods_by_receiver_type() -> None:
    import numpy as np

    window = Classifier(Classifications(FunctionFilter()), Meter())
    assert window.c_function(len, sys.modules["builtins"]) is None  # the standard library
    assert window.c_cache[len] is None
    info = window.c_function(np.zeros(2).astype, np.zeros(2))
    assert info == ("numpy.ndarray.astype", "numpy")
    assert not window.skipped(np.concatenate) and window.skipped(len)
