"""EnhancedTracer: dataflow through C calls, id reuse, hook safety, names, depth, memory."""

from __future__ import annotations

import json
import sys
import threading

import cv2
import numpy as np
import pytest
import trace_pipelines as pipelines

from codedag.graph import ExecutionDAG
from codedag.trace import EnhancedTracer, canonical_name, trace_function


def calls_named(dag: ExecutionDAG, name: str) -> list:
    return [n for n in dag.calls() if n.name == name]


def test_resize_cvtcolor_normalize_chain_links_through_value_nodes() -> None:
    img = np.random.default_rng(0).integers(0, 255, (64, 48, 3), dtype=np.uint8)
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        out = pipelines.chain(img)
    dag = tracer.dag_builder.dag
    dag.self_check()
    (root,) = calls_named(dag, "trace_pipelines.chain")
    (resize,) = calls_named(dag, "cv2.resize")
    (cvt,) = calls_named(dag, "cv2.cvtColor")
    (norm,) = calls_named(dag, "cv2.normalize")
    assert dag.successors(root.id, "calls") == [resize.id, cvt.id, norm.id]
    assert dag.dataflow_successors(resize.id) == [cvt.id]
    assert dag.dataflow_successors(cvt.id) == [norm.id]
    (small,) = dag.successors(resize.id, "produces")
    value = dag.nodes[small]
    assert (value.shape, value.dtype, value.nbytes) == ([32, 32, 3], "uint8", 32 * 32 * 3)
    # the input image flows into the root call and into resize: one value node
    (img_node,) = dag.predecessors(resize.id, "uses")
    assert root.id in dag.successors(img_node, "uses")
    (final,) = dag.successors(norm.id, "produces")
    assert dag.nodes[final].dtype == "float32" and dag.nodes[final].nbytes == out.nbytes
    assert root.return_summary == "ndarray[32,32,3] float32"
    assert resize.arg_summaries[0] == "ndarray[64,48,3] uint8"
    assert resize.context_key == "trace_pipelines.chain#0/cv2.resize#0"
    assert resize.is_builtin and not root.is_builtin
    assert resize.call_site.endswith("pipelines.py:11")
    assert root.total_ns >= resize.total_ns + cvt.total_ns + norm.total_ns
    assert resize.mem_bytes >= 32 * 32 * 3  # its output was allocated inside it


def test_aliases_and_bound_references_get_canonical_names() -> None:
    assert canonical_name(np.clip) == "numpy.clip"
    assert canonical_name(cv2.resize) == "cv2.resize"
    assert canonical_name(np.zeros(1).astype) == "numpy.ndarray.astype"
    tracer = EnhancedTracer()
    img = np.zeros((16, 16), np.uint8)
    with tracer.tracing_context():
        pipelines.aliased(img)
    names = [n.name for n in tracer.dag.calls()]
    assert names == ["trace_pipelines.aliased", "cv2.resize", "numpy.clip"]
    # numpy's internals behind numpy.clip are not recorded; the wrappers are gone afterwards
    assert pipelines.bound_resize is cv2.resize
    assert not hasattr(cv2.resize, "__codedag_original__")
    (resize,) = calls_named(tracer.dag, "cv2.resize")
    assert tracer.dag.dataflow_successors(resize.id) == [
        calls_named(tracer.dag, "numpy.clip")[0].id
    ]


def test_recycled_ids_never_create_edges() -> None:
    template = np.zeros(16)
    tracer = EnhancedTracer(track_memory=False)
    collisions = 0
    with tracer.tracing_context():
        seen: set[int] = set()
        # whether a freed id comes back soon depends on the allocator's state (what ran before):
        # go on until a few have, or long enough that none coming back means something
        for _ in range(2000):
            if collisions >= 5:
                break
            produced = pipelines.produce()
            seen.add(id(produced))
            del produced  # freed: its id may now be reused
            fresh = template.copy()  # a new array made by an unrecorded C method
            if id(fresh) in seen:
                collisions += 1
            pipelines.consume(fresh)
            del fresh
    assert collisions > 0, "the allocator never reused an id: the test proves nothing"
    dag = tracer.dag
    dag.self_check()
    for consumer in calls_named(dag, "trace_pipelines.consume"):
        for value_id in dag.predecessors(consumer.id, "uses"):
            assert dag.predecessors(value_id, "produces") == []
    assert all(
        not dag.dataflow_successors(p.id) for p in calls_named(dag, "trace_pipelines.produce")
    )


def test_hook_restored_after_exception_and_partial_dag_kept() -> None:
    def previous(frame, event, arg):  # a profiler that was there before
        return None

    tracer = EnhancedTracer()
    sys.setprofile(previous)
    try:
        with pytest.raises(ValueError, match="bad sample 3"), tracer.tracing_context():
            pipelines.boom(3)
        assert sys.getprofile() is previous
    finally:
        sys.setprofile(None)
    names = [n.name for n in tracer.dag.calls()]
    assert names == ["trace_pipelines.boom", "trace_pipelines.helper"]
    tracer.dag.self_check()
    assert not hasattr(cv2.resize, "__codedag_original__")


def test_nested_tracers_restore_each_other() -> None:
    outer, inner = EnhancedTracer(), EnhancedTracer()
    img, gray = np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8), np.uint8)
    with outer.tracing_context():
        pipelines.helper(1)
        hook = sys.getprofile()
        with inner.tracing_context():
            pipelines.chain(img)
        assert sys.getprofile() is hook
        pipelines.aliased(gray)
    assert sys.getprofile() is None
    assert [n.name for n in inner.dag.calls()][:2] == ["trace_pipelines.chain", "cv2.resize"]
    outer_names = [n.name for n in outer.dag.calls()]
    assert "trace_pipelines.helper" in outer_names and "cv2.resize" in outer_names
    assert "cv2.cvtColor" not in outer_names  # the inner window had those
    # the same tracer re-entered continues one window
    with outer.tracing_context(), outer.tracing_context():
        pipelines.helper(2)
    assert [n.name for n in outer.dag.calls()] == ["trace_pipelines.helper"]


def test_decorator_traces_each_call_and_recursion_stays_in_one_window() -> None:
    traced = trace_function(max_depth=4)(pipelines.nested)
    assert traced(6) == 6
    dag = traced.last_dag
    depths = [n.depth for n in dag.calls()]
    assert depths == [0, 1, 2, 3]  # max_depth bounds nesting
    assert dag.nodes[0].context_key == "trace_pipelines.nested#0"

    @trace_function
    def bare() -> int:
        return pipelines.helper(1)

    assert bare() == 2
    assert [n.name for n in bare.last_dag.calls()][-1] == "trace_pipelines.helper"


def test_json_round_trip_of_a_traced_dag_is_lossless(tmp_path) -> None:
    tracer = EnhancedTracer()
    img = np.ones((20, 20, 3), np.uint8)
    with tracer.tracing_context():
        pipelines.chain(img)
    dag = tracer.dag
    path = tracer.save(tmp_path / "dag.json")
    loaded = ExecutionDAG.load(path)
    assert loaded.to_dict() == dag.to_dict()
    assert loaded.nodes == dag.nodes and loaded.edges == dag.edges
    flow = tracer.export_dataflow_graph()
    json.dumps(flow)
    assert len(flow["dataflow"]) == 2  # resize -> cvtColor -> normalize


def test_no_memory_mode_and_other_threads() -> None:
    import tracemalloc

    tracer = EnhancedTracer(track_memory=False)
    results = []
    img = np.zeros((8, 8, 3), np.uint8)
    with tracer.tracing_context():
        worker = threading.Thread(target=lambda: results.append(pipelines.chain(img)))
        worker.start()
        worker.join()
        assert not tracemalloc.is_tracing()
        pipelines.helper(1)
    assert results and [n.name for n in tracer.dag.calls()] == ["trace_pipelines.helper"]
    assert all(n.mem_bytes == 0 for n in tracer.dag.calls())
    assert tracer.dag.metadata["tracer"]["track_memory"] is False


def test_memory_per_call_and_with_tracemalloc_already_running() -> None:
    import tracemalloc

    img = np.zeros((64, 64, 3), np.uint8)
    for already_tracing in (False, True):
        if already_tracing:
            tracemalloc.start()
        try:
            tracer = EnhancedTracer()
            with tracer.tracing_context():
                pipelines.chain(img)
            assert tracemalloc.is_tracing() is already_tracing  # the user's session is kept
        finally:
            if already_tracing:
                tracemalloc.stop()
        dag = tracer.dag
        mode = dag.metadata["tracer"]["memory_mode"]
        assert mode == ("window" if already_tracing else "per_call")
        (root,) = calls_named(dag, "trace_pipelines.chain")
        (resize,) = calls_named(dag, "cv2.resize")
        (norm,) = calls_named(dag, "cv2.normalize")
        assert resize.mem_bytes >= 32 * 32 * 3
        assert norm.mem_bytes >= 32 * 32 * 3 * 4  # float32 output
        assert root.mem_bytes >= norm.mem_bytes


def test_pil_images_flow_between_python_methods_and_numpy() -> None:
    import PIL.Image  # noqa: F401 - imported before the window so numpy sees the type

    arr = np.zeros((16, 16, 3), np.uint8)
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        out = pipelines.pil_pipeline(arr)
    assert out.shape == (8, 8, 3)
    dag = tracer.dag
    names = [n.name for n in dag.calls() if n.depth == 1]
    assert names == ["PIL.Image.fromarray", "PIL.Image.Image.resize", "numpy.asarray"]
    (fromarray,) = calls_named(dag, "PIL.Image.fromarray")
    (resize,) = calls_named(dag, "PIL.Image.Image.resize")
    (asarray,) = calls_named(dag, "numpy.asarray")
    assert dag.dataflow_successors(fromarray.id) == [resize.id]
    # numpy.asarray reads the image through PIL's __array_interface__: a PIL entry under numpy
    assert asarray.id in dag.dataflow_successors(resize.id)
    children = [dag.nodes[c].name for c in dag.successors(asarray.id, "calls")]
    assert children == ["PIL.Image.Image.__array_interface__"]
    (image_value,) = dag.successors(resize.id, "produces")
    assert dag.nodes[image_value].shape == [8, 8, 3] and dag.nodes[image_value].dtype == "RGB"


def test_wrappers_kept_across_windows() -> None:
    tracer = EnhancedTracer(track_memory=False)
    img = np.zeros((16, 16, 3), np.uint8)
    with tracer.wrappers_kept():
        wrapped = cv2.resize
        assert hasattr(wrapped, "__codedag_original__")
        assert pipelines.chain(img).shape == (32, 32, 3)  # between windows: forwards only
        names = []
        for _ in range(2):
            with tracer.tracing_context():
                pipelines.chain(img)
            assert cv2.resize is wrapped  # still installed
            names.append([n.name for n in tracer.dag.calls()])
    assert not hasattr(cv2.resize, "__codedag_original__")
    assert (
        names[0]
        == names[1]
        == [
            "trace_pipelines.chain",
            "cv2.resize",
            "cv2.cvtColor",
            "cv2.normalize",
        ]
    )


def test_imports_inside_the_window_are_not_recorded(tmp_path, monkeypatch) -> None:
    (tmp_path / "freshly_imported_mod.py").write_text(
        "import numpy as np\n\ndef helper():\n    return np.zeros(3)\n\nTABLE = helper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    def load_and_use():
        import freshly_imported_mod

        return freshly_imported_mod.helper()

    tracer = EnhancedTracer()
    with tracer.tracing_context():
        load_and_use()
    names = [n.name for n in tracer.dag.calls()]
    assert names[1:] == ["freshly_imported_mod.helper", "numpy.zeros"]  # the call, not the import
    sys.modules.pop("freshly_imported_mod", None)


class _WatchingFinder:
    """A Python finder on sys.meta_path that finds nothing (as absl's reload detector)."""

    def find_spec(self, name, path=None, target=None):
        return None


def test_import_hooks_run_inside_the_window_are_not_recorded(tmp_path, monkeypatch) -> None:
    (tmp_path / "hooked_import_mod.py").write_text(
        "import numpy as np\n\ndef helper():\n    return np.zeros(3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", [_WatchingFinder(), *sys.meta_path])

    def load_and_use():
        import hooked_import_mod

        return hooked_import_mod.helper()

    tracer = EnhancedTracer()
    with tracer.tracing_context():
        load_and_use()
    names = [n.name for n in tracer.dag.calls()]
    assert names[1:] == ["hooked_import_mod.helper", "numpy.zeros"]  # not the finder
    sys.modules.pop("hooked_import_mod", None)


def test_start_stop_misuse_is_reported() -> None:
    from codedag.errors import TraceError

    tracer = EnhancedTracer()
    with pytest.raises(TraceError, match="without an open tracing window"):
        tracer.stop()
    errors = []
    tracer.start()
    try:
        worker = threading.Thread(target=lambda: errors.append(_stop_error(tracer)))
        worker.start()
        worker.join()
    finally:
        tracer.stop()
    assert errors and "same thread" not in errors[0] and "thread that called start" in errors[0]


def _stop_error(tracer: EnhancedTracer) -> str:
    from codedag.errors import TraceError

    try:
        tracer.stop()
    except TraceError as error:
        return str(error)
    return ""


def test_a_cprofile_running_before_is_running_again_after() -> None:
    """cProfile's hook, written in C, is not a callable: put back with sys.setprofile it would
    raise in the program's next call. It keeps counting after the window."""
    import cProfile

    profiler = cProfile.Profile()
    tracer = EnhancedTracer()
    profiler.enable()
    try:
        before = sys.getprofile()
        with tracer.tracing_context():
            pipelines.helper(1)
        restored = sys.getprofile()
        pipelines.helper(2)  # raised TypeError when the hook came back as a Python function
    finally:
        profiler.disable()
    assert restored is before
    assert "trace_pipelines.helper" in [n.name for n in tracer.dag.calls()]
    profiler.create_stats()
    calls = [
        stat[1]
        for where, stat in profiler.stats.items()
        if where[2] == "helper"  # type: ignore[attr-defined]
    ]
    assert calls and sum(calls) >= 1  # the call after the window was counted
