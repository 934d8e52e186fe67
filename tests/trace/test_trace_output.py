"""DOT/SVG export, the filter's classification, names, and tracer failures that must not leak."""

from __future__ import annotations

import os
import shutil
import sys

import cv2
import numpy as np
import pytest
import trace_pipelines as pipelines

from codedag.graph.algorithms import topological_ranks
from codedag.trace import DAGBuilder, EnhancedTracer, FunctionFilter, canonical_name
from codedag.trace import dot as dot_module


@pytest.fixture(scope="module")
def chain_dag():
    tracer = EnhancedTracer()
    img = np.zeros((16, 16, 3), np.uint8)
    with tracer.tracing_context():
        pipelines.chain(img)
    return tracer


def test_dot_is_layered_by_rank_and_styled_by_kind(chain_dag) -> None:
    dag = chain_dag.dag
    text = dot_module.to_dot(dag)
    ranks = topological_ranks(dag)
    for rank in set(ranks.values()):
        members = sorted(i for i, r in ranks.items() if r == rank)
        assert "{ rank=same; " + " ".join(f"n{i};" for i in members) + " }" in text
    resize = next(n for n in dag.calls() if n.name == "cv2.resize")
    assert f'n{resize.id} [label="cv2.resize\\n' in text
    assert dot_module.CALL_COLORS["builtin"] in text and dot_module.VALUE_COLOR in text
    assert text.count('label="produces"') == sum(1 for e in dag.edges if e[2] == "produces")
    assert "ellipse" in text and "rounded,filled" in text
    cut = dot_module.to_dot(dag, max_nodes=3)
    assert "(first 3 of" in cut and "n3 [" not in cut


def test_svg_through_dot_or_dot_with_a_hint(chain_dag, tmp_path, monkeypatch, caplog) -> None:
    if shutil.which("dot"):
        written = chain_dag.export_visualization(tmp_path / "dag.svg")
        assert written.name == "dag.svg" and "<svg" in written.read_text()
    monkeypatch.setattr(dot_module.shutil, "which", lambda _name: None)
    written = chain_dag.export_visualization(tmp_path / "nodot.svg")
    assert written == tmp_path / "nodot.dot" and written.read_text().startswith("digraph")
    assert "dot -Tsvg" in caplog.text
    written = chain_dag.export_visualization(tmp_path / "plain.dot")
    assert written.suffix == ".dot"


def test_a_dag_over_svg_max_nodes_is_written_as_dot_without_running_dot(
    chain_dag, tmp_path, monkeypatch, caplog
) -> None:
    def no_dot(*_args: object, **_kwargs: object) -> bytes:
        raise AssertionError("dot ran for a DAG over the limit")

    monkeypatch.setattr(dot_module, "render_svg", no_dot)
    monkeypatch.setattr(dot_module, "SVG_MAX_NODES", 3)  # the default limit
    written = chain_dag.export_visualization(tmp_path / "dag.svg")
    assert written == tmp_path / "dag.dot" and not (tmp_path / "dag.svg").exists()
    assert written.read_text() == dot_module.to_dot(chain_dag.dag)
    assert "svg_max_nodes=3" in caplog.text and "`codedag trace` draws it coarsened" in caplog.text
    caplog.clear()
    nodes = len(chain_dag.dag.nodes)
    monkeypatch.setattr(dot_module.shutil, "which", lambda _name: "/usr/bin/dot")
    monkeypatch.setattr(dot_module, "render_svg", lambda _text, _timeout=None: b"<svg/>")
    written = chain_dag.export_visualization(tmp_path / "big.svg", svg_max_nodes=nodes)
    assert written == tmp_path / "big.svg" and written.read_bytes() == b"<svg/>"
    assert "svg_max_nodes" not in caplog.text


def test_filter_classification() -> None:
    f = FunctionFilter(include=["torch.utils.data.sampler"], exclude=["mypkg.noise"])
    assert (
        f.classify_module(
            "json.decoder", os.path.join(os.path.dirname(os.__file__), "json", "decoder.py")
        )
        is False
    )
    assert f.classify_module("mypkg.data", "/home/u/mypkg/data.py") is None
    assert f.classify_module("mypkg.noise", "/home/u/mypkg/noise.py") is False
    site = os.path.dirname(np.__file__)
    assert (
        f.classify_module("numpy._core.fromnumeric", os.path.join(site, "_core", "x.py")) == "numpy"
    )
    assert f.classify_module("torch.utils.data._utils.collate", "/x/site-packages/torch/c.py") == (
        "torch.utils.data.collate"
    )
    assert f.classify_module("torch.utils.data.sampler", "/x/site-packages/torch/s.py") is None
    assert (
        f.classify_module("_distutils_hack", "/x/site-packages/_distutils_hack/__init__.py")
        is False
    )
    assert f.classify_callable("builtins.len") is None
    assert f.classify_callable("cv2.resize").library == "cv2"


def test_known_libraries_installed_outside_site_packages_stay_libraries() -> None:
    """`pip install --target DIR` and PYTHONPATH put libraries outside site-packages; their
    internals (librosa's own numpy.pad calls) must not become user code."""
    f = FunctionFilter()
    where = "/tmp/codedag-gpu-site/librosa/feature/spectral.py"
    assert f.classify_module("librosa.feature.spectral", where) == "librosa"
    assert f.classify_module("mypkg.audio", "/tmp/codedag-gpu-site/mypkg/audio.py") is None


def test_canonical_names_of_many_kinds() -> None:
    import torch

    assert canonical_name(torch.stack) == "torch.stack"
    assert canonical_name(np.random.rand) == "numpy.random.rand"
    assert canonical_name(np.add) == "numpy.add"
    assert canonical_name(len) == "builtins.len"
    assert canonical_name(pipelines.Weird) == "trace_pipelines.Weird"
    assert canonical_name(pipelines.chain) == "trace_pipelines.chain"
    import functools

    assert canonical_name(functools.partial(cv2.resize, dsize=(2, 2))) == "cv2.resize"


def test_library_internals_are_skipped_and_user_code_inside_is_not() -> None:
    tracer = EnhancedTracer()
    img = np.zeros((8, 8), np.uint8)
    with tracer.tracing_context():
        pipelines.array_user(img)
    names = [n.name for n in tracer.dag.calls()]
    assert names == ["trace_pipelines.array_user", "cv2.GaussianBlur", "numpy.clip"]
    blur, clip = (next(n for n in tracer.dag.calls() if n.name == k) for k in names[1:])
    assert tracer.dag.dataflow_successors(blur.id) == [clip.id]


def test_a_failing_value_description_stops_tracing_without_breaking_the_code(caplog) -> None:
    tracer = EnhancedTracer(value_types=[pipelines.Weird])
    img = np.zeros((8, 8, 3), np.uint8)
    with tracer.tracing_context():
        assert pipelines.takes_weird(pipelines.Weird()) == 1
        out = pipelines.chain(img)  # still runs, unrecorded
    assert out.shape == (32, 32, 3)
    assert "no shape for you" in tracer.dag.metadata["tracer"]["error"]
    assert sys.getprofile() is None
    assert not hasattr(cv2.resize, "__codedag_original__")


def test_seed_builder_api_versions_values() -> None:
    builder = DAGBuilder()
    f = builder.add_function_node("pkg.f", context="pkg.f#0")
    v0 = builder.add_variable_node("x")
    v1 = builder.add_variable_node("x")
    builder.add_edge(f, v1, "produces")
    builder.add_edge(v0, f, "uses")
    dag = builder.dag
    assert [dag.nodes[v].version for v in (v0, v1)] == [0, 1]
    assert dag.nodes[v1].performance["memory_bytes"] == 0
    dag.self_check()


def test_dot_colors_user_library_and_c_calls(chain_dag) -> None:
    text = dot_module.to_dot(chain_dag.dag)
    root_line = next(line for line in text.splitlines() if '"trace_pipelines.chain' in line)
    assert dot_module.CALL_COLORS["user"] in root_line
    resize_line = next(line for line in text.splitlines() if '"cv2.resize' in line)
    assert dot_module.CALL_COLORS["builtin"] in resize_line
