"""The sys.monitoring event source (Python 3.12+), run under a 3.12+ interpreter when one exists.

The suite's own interpreter may be 3.11 (torch has no wheel here for 3.12): the trace package
needs no torch, so these tests run a small script under a 3.12+ interpreter that has NumPy and
OpenCV (``CODEDAG_PYTHON312``, ``.venv312/bin/python`` in the repository, or ``python3.12`` /
``python3.13`` on PATH) and check what it reports. Create one with::

    PYENV_VERSION=3.12.1 python -m venv .venv312
    .venv312/bin/pip install numpy opencv-python-headless rustworkx
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from trace_core import core_session

import codedag.trace.monitoring as monitoring
from codedag.trace.records import NAME

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys, threading
import numpy as np
import real_pipelines as rp
import trace_pipelines as tp
from codedag.trace import EnhancedTracer

out = {"version": sys.version_info[:2]}
img = np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)

def dataflow(dag, a, b):
    src = next(n.id for n in dag.calls() if n.name == a)
    dst = next(n.id for n in dag.calls() if n.name == b)
    seen, todo = {src}, [src]
    while todo:
        for nxt in dag.dataflow_successors(todo.pop()):
            if nxt == dst:
                return True
            if nxt not in seen:
                seen.add(nxt); todo.append(nxt)
    return False

t = EnhancedTracer()
with t.tracing_context():
    rp.detect_sample(img)
d = t.dag
d.self_check()
out["source"] = d.metadata["tracer"]["event_source"]
out["helper_chain"] = dataflow(d, "cv2.resize", "cv2.cvtColor") and dataflow(
    d, "cv2.cvtColor", "cv2.GaussianBlur")

t = EnhancedTracer()
with t.tracing_context():
    rp.classify_sample(img)
d = t.dag
d.self_check()
out["classify"] = [n.name for n in d.calls() if n.depth == 1]
out["classify_chain"] = dataflow(d, "cv2.GaussianBlur", "numpy.ascontiguousarray")

t = EnhancedTracer()
with t.tracing_context():
    rp.mosaic([img] * 4)
d = t.dag
setitems = [n for n in d.calls() if n.name == "operator.setitem"]
out["versions"] = [d.nodes[d.successors(s.id, "produces")[0]].version for s in setitems]

t = EnhancedTracer()
with t.tracing_context():
    rp.two_channels(np.ones(3), np.zeros(4))
d = t.dag
out["concat"] = [n.name for n in d.calls() if n.depth == 1]

t = EnhancedTracer(track_memory=False, prune_after=16)
with t.tracing_context():
    tp.score(3000)
meta = t.dag.metadata["tracer"]
out["tokenize_calls"] = sum(1 for n in t.dag.calls() if n.name == "trace_pipelines.tokenize")
out["pruned"], out["lines_stopped"] = meta["pruned"], meta["lines_stopped"]

# other threads' events are ignored; nested windows hand the tool back
outer, inner = EnhancedTracer(), EnhancedTracer()
with outer.tracing_context():
    worker = threading.Thread(target=lambda: rp.detect_sample(img))
    worker.start(); worker.join()
    with inner.tracing_context():
        tp.helper(1)
    tp.helper(2)
out["outer"] = [n.name for n in outer.dag.calls()]
out["inner"] = [n.name for n in inner.dag.calls()]
out["tool_free"] = all(sys.monitoring.get_tool(i) is None for i in (2, 3, 4, 5))
print(json.dumps(out))
"""


def _interpreter() -> str | None:
    candidates = [
        os.environ.get("CODEDAG_PYTHON312"),
        str(ROOT / ".venv312" / "bin" / "python"),
        shutil.which("python3.12"),
        shutil.which("python3.13"),
    ]
    check = "import sys, numpy, cv2; assert sys.version_info >= (3, 12)"
    for path in candidates:
        if not path or not Path(path).exists():
            continue
        try:
            subprocess.run([path, "-c", check], check=True, capture_output=True, timeout=60)
        except (subprocess.SubprocessError, OSError):
            continue
        return path
    return None


@pytest.fixture(scope="module")
def report() -> dict:
    python = _interpreter()
    if python is None:
        pytest.skip("no Python 3.12+ interpreter with numpy and cv2 (see module doc)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT / "tests" / "support"), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [python, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.timeout(320)
def test_events_come_from_sys_monitoring(report) -> None:
    assert report["version"] >= [3, 12]
    assert report["source"] == "sys.monitoring"
    assert report["tool_free"]  # every window gave its tool id back


@pytest.mark.timeout(320)
def test_dataflow_steps_and_names_match_the_311_tracer(report) -> None:
    assert report["helper_chain"] and report["classify_chain"]
    assert report["classify"] == [
        "cv2.GaussianBlur",
        "numpy.ndarray.astype",
        "operator.truediv",
        "operator.truediv",
        "numpy.ndarray.transpose",
        "numpy.ascontiguousarray",
    ]
    assert report["versions"] == [1, 2, 3, 4]
    assert report["concat"] == ["numpy.concatenate", "operator.mul"]


@pytest.mark.timeout(320)
def test_pruning_and_threads_and_nesting(report) -> None:
    assert report["tokenize_calls"] == 16
    assert report["pruned"] == ["trace_pipelines.tokenize"]
    assert report["lines_stopped"] == ["trace_pipelines.score"]
    assert report["outer"] == ["trace_pipelines.helper"]  # helper(2), after the inner window
    assert report["inner"] == ["trace_pipelines.helper"]


def test_this_interpreter_uses_the_matching_source() -> None:
    from codedag.trace import EnhancedTracer

    tracer = EnhancedTracer()
    with tracer.tracing_context():
        pass
    expected = "sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile"
    assert tracer.dag.metadata["tracer"]["event_source"] == expected


# In this interpreter: the module itself (its tests below run on 3.12+ only).
HAS_MONITORING = sys.version_info >= (3, 12)


def test_availability_follows_the_interpreter() -> None:
    assert monitoring.monitoring_available() is HAS_MONITORING
    if not HAS_MONITORING:
        assert monitoring.tool_available() is False
        s = core_session(use_monitoring=True)
        assert s.use_monitoring is False and s.monitoring_callbacks == {}


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_nested_windows_share_one_tool_id_and_the_outer_one_gives_it_back() -> None:
    api = monitoring.api()
    outer, inner = core_session(), core_session()
    outer.start()
    try:
        tool = outer.monitoring_tool
        assert tool is not None and api.get_tool(tool) == monitoring.TOOL_NAME
        inner.start()
        try:
            assert inner.monitoring_tool == tool
        finally:
            inner.stop()
        assert inner.monitoring_tool is None and api.get_tool(tool) == monitoring.TOOL_NAME
    finally:
        outer.stop()
    assert api.get_tool(tool) is None


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_the_callbacks_record_a_library_call() -> None:
    image = np.ones(3)
    s = core_session()
    s.start()
    try:
        np.flip(image)
    finally:
        s.stop()
    assert s.use_monitoring and "numpy.flip" in [r[NAME] for r in s.calls]
