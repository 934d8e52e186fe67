"""Call counters and ufunc proxies."""

from __future__ import annotations

import pickle

import numpy as np
from migrate_support import make_registry, plan_for, sin

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.proxy import Count, ufunc_proxy

GET = "app.DS.__getitem__"


def test_counters_are_read_without_advancing() -> None:
    counter = Count()
    assert counter.value == 0
    for _ in range(5):
        counter.add()
    assert counter.value == 5 and counter.value == 5


def test_a_ufunc_replacement_keeps_the_ufunc_methods() -> None:
    original = np.sin
    plan = plan_for({f"{GET}#0/numpy.sin#0": "cpu"})
    with PipelineMigrator.from_plan(plan, registry=make_registry(**{"numpy.sin": sin})):
        assert np.sin is not original and "codedag wrapper" in repr(np.sin)
        assert (np.sin.__name__, np.sin.nin, np.sin.types) == ("sin", 1, original.types)
        values = np.ones(3)
        np.sin.at(values, [0])  # a ufunc method: the ufunc's own
    assert values[0] == original(1.0) and values[1] == 1.0


def test_a_proxy_not_installed_anywhere_unpickles_to_the_module_attribute() -> None:
    proxy = ufunc_proxy(lambda *a, **k: "called", np.cos, None, "numpy")
    assert proxy(1.0) == "called" and proxy.nin == 1
    assert pickle.loads(pickle.dumps(proxy)) is np.cos  # numpy.cos is not this proxy
