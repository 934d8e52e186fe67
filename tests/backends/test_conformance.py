"""Conformance: every registry name, call by call against the original library.

For each function, a generated corpus (``conformance_corpus``) of calls runs through the migrated
path (:class:`~codedag.backends.executor.Executor`, device ``cpu``; ``cpu-staged``, the CPU through
the staging and copy-back conversions a CUDA device takes; ``cuda`` under ``pytest -m gpu``)
and through the library. Each call must be declared unsupported before its backend runs, or raise
the library's exception class, or return what the library returns within the tolerance table
(types, shapes, dtypes, layout, values; no output sharing memory with an input where the
library's does not; no input written). Hypothesis explores further combinations (CI runs a fixed
set; ``CONFORMANCE_EXAMPLES=200`` explores further). The counts are printed at the end of the
session:

    .venv/bin/python -m pytest tests/migrate/test_conformance.py -q
"""

from __future__ import annotations

import os

import pytest
from conformance_corpus import cases, covered, explore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from migrate_support import TALLY, Case, conform

from codedag.backends.registry import default_registry

NAMES = sorted(default_registry().names())
EXAMPLES = examples(int(os.environ.get("CONFORMANCE_EXAMPLES", "6")))
"""Hypothesis draws per function (CI: 6, derandomized by the ``ci`` profile; more under the
``nightly`` profile)."""
CORPUS_NAMES = sorted(covered() & set(NAMES))


def test_every_registry_name_has_a_corpus() -> None:
    missing = sorted(set(NAMES) - covered())
    assert not missing, f"no conformance corpus for {missing}"


def _run(name: str, label: str, case: Case, device: str) -> str | None:
    outcome, detail = conform(name, case, device)
    TALLY.add(name, label, outcome, detail)
    return f"[{label}] {detail}" if outcome == "failed" else None


@pytest.mark.parametrize(
    "device", ["cpu", "cpu-staged", pytest.param("cuda", marks=pytest.mark.gpu)]
)
@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_corpus(name: str, device: str) -> None:
    failures = [f for label, case in cases(name) if (f := _run(name, label, case, device))]
    assert not failures, f"{name}: {len(failures)} cases differ:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize("name", CORPUS_NAMES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_explored(name: str, data: st.DataObject) -> None:
    label, case = data.draw(explore(name))
    failure = _run(name, label, case, "cpu")
    assert failure is None, f"{name}: {failure}"


def test_overlap_of_interleaved_views_is_answered_at_once() -> None:
    """Exact overlap of strided views is exponential in NumPy; the check bounds its work."""
    import numpy as np
    from migrate_support import call_within, shares_memory

    base = np.zeros((64, 64, 64), dtype=np.uint8)
    assert call_within(30, lambda: shares_memory(base[::3, 1::5, ::7], base[1::2, ::3, 2::4]))
    assert not shares_memory(base[:32], base[32:])
    assert shares_memory(base[5:9], base[8:])
    assert not shares_memory(base, np.zeros(4))


def test_random_draws_are_held_to_what_the_library_could_draw() -> None:
    import numpy as np
    from migrate_support import outside_support

    def check(fn: str, got: object, *args: object, before: tuple = (), **kwargs: object) -> str:
        return outside_support(f"numpy.random.{fn}", got, args, dict(kwargs), list(before))

    assert not check("rand", np.array([0.0, 0.5]), 2)
    assert check("rand", np.array([0.5, 1.0]), 2)
    assert not check("randint", np.array([5, 9]), 5, 10)
    assert check("randint", np.array([5, 10]), 5, 10)
    assert check("randint", np.array([3]), 3, size=1)  # high=None: [0, low)
    assert not check("uniform", np.array([-1.0, 1.5]), -1.0, 2.0)
    assert check("uniform", np.array([2.5]), -1.0, 2.0)
    x = np.arange(6).reshape(3, 2)
    assert not check("permutation", x[::-1], x, before=(x,))
    assert check("permutation", x * 2, x, before=(x,))
    assert not check("permutation", np.array([2, 0, 1]), 3)
    assert check("shuffle", None, np.zeros((3, 2), int), before=(x,))
    assert not check("choice", np.array([1.0, 1.0]), np.array([1.0, 2.0]), size=2)
    assert check("choice", np.array([1.0, 1.0]), np.array([1.0, 2.0]), size=2, replace=False)
    assert check("choice", np.array([7]), 5, size=1)
