"""Values by identity: weak references for what supports them, strong ones for the rest, and no
entry outliving its object."""

from __future__ import annotations

import gc
import sys

import numpy as np

from codedag.trace.identity import ValueTracker
from codedag.trace.records import Sequence
from codedag.trace.value_nodes import DataTypes


def tracker() -> ValueTracker:
    return ValueTracker([], Sequence(), DataTypes())


def test_new_values_and_versions_share_the_window_numbering() -> None:
    t = tracker()
    t.sequence.take()  # a call record took 0
    a = np.zeros((2, 3), np.uint8)
    assert t.new_value(a, 0) == 1
    assert t.new_value(a, 1) == 2  # the same object again: a new version
    entry = t.lookup(a)
    assert entry is not None and entry[1:3] == (2, 1)
    assert [v[0] for v in t.values] == [1, 2]
    assert t.values[0][1:8] == [
        "ndarray",
        0,
        "numpy.ndarray",
        (2, 3),
        np.dtype("uint8"),
        6,
        "cpu",
    ]


def test_use_makes_version_zero_once_and_lists_each_value_once() -> None:
    t = tracker()
    a, b = np.zeros(4), np.ones(4)
    found: list[int] = []
    first = t.use(a, found)
    assert t.use(a, found) == first
    second = t.use(b, found)
    assert found == [first, second]
    assert [v[2] for v in t.values] == [0, 0]


def test_a_dead_object_leaves_no_entry_and_its_id_matches_nothing() -> None:
    t = tracker()
    a = np.zeros(8)
    key = id(a)
    t.new_value(a, 0)
    del a
    gc.collect()
    assert key not in t.live  # the weak reference's callback dropped it
    # An entry whose object died (as if the callback had not run yet) never matches a newcomer.
    b = np.zeros(8)
    t.live[id(b)] = (lambda: None, 0, 0, None, True)
    assert t.lookup(b) is None


def test_containers_are_held_strongly_until_the_window_closes() -> None:
    t = tracker()
    batch = [np.zeros(4, np.uint8), np.zeros(6, np.uint8)]
    untracked = sys.getrefcount(batch)
    vseq = t.new_value(batch, 0)
    assert t.values[-1][6] == 10  # the bytes of the data values it holds
    assert sys.getrefcount(batch) == untracked + 1
    entry = t.lookup(batch)
    assert entry is not None and entry[0] is batch and entry[1] == vseq and not entry[4]
    del entry
    t.clear()
    assert t.lookup(batch) is None
    assert sys.getrefcount(batch) == untracked
