"""codedag's example pipelines traced end to end: their chains hold through helpers, operators,
methods and canvases, and worker replays equal the workers' batches."""

from __future__ import annotations

import itertools

import pytest
import torch
from test_dataflow import flows

from codedag.experiments import pipelines
from codedag.graph import ExecutionDAG
from codedag.trace import EnhancedTracer, trace_dataloader

PKG = "codedag.experiments.pipelines"


def traced(name: str, num_workers: int = 0, **options) -> tuple[ExecutionDAG, object]:
    loader = pipelines.make_loader(name, batch_size=2, num_workers=num_workers, **options)
    tracer, batch = trace_dataloader(loader, EnhancedTracer(track_memory=False), warmup=1)
    tracer.dag.self_check()
    return tracer.dag, batch


def first(dag: ExecutionDAG, name: str, under: str = ""):
    return next(n for n in dag.calls() if n.name == name and under in n.context_key)


def sample_chain(dag: ExecutionDAG, getitem: str, *names: str) -> None:
    """Data flows through ``names`` in order, inside the first sample."""
    under = f"{getitem}#0/"
    nodes = [first(dag, name, under) for name in names]
    for a, b in itertools.pairwise(nodes):
        assert flows(dag, a.id, b.id), f"no dataflow {a.name} -> {b.name}"


def test_letterbox_pipeline_chain_through_helpers_and_operators() -> None:
    dag, batch = traced("letterbox", img_size=96)
    getitem = f"{PKG}.letterbox.LetterboxDataset.__getitem__"
    sample_chain(
        dag,
        getitem,
        "cv2.imdecode",
        "cv2.resize",  # inside the letterbox helper
        "cv2.copyMakeBorder",
        "cv2.cvtColor",
        "cv2.GaussianBlur",
        "operator.truediv",  # normalize written with operators, in a helper
        "numpy.ndarray.transpose",
        "numpy.ascontiguousarray",
        "torch.from_numpy",
    )
    collate = next(n for n in dag.calls() if n.name.endswith("default_collate"))
    assert flows(dag, first(dag, "torch.from_numpy").id, collate.id)
    assert batch[0].shape == (2, 3, 96, 96)


def test_yolo_mosaic_canvas_chain() -> None:
    dag, _ = traced("yolo_mosaic", img_size=96, hyp={"mosaic": 1.0})
    getitem = f"{PKG}.yolo_mosaic.YoloMosaicDataset.__getitem__#0/"
    resizes = [n for n in dag.calls() if n.name == "cv2.resize" and getitem in n.context_key]
    setitems = [n for n in dag.calls() if n.name == "operator.setitem" and getitem in n.context_key]
    warp = first(dag, "cv2.warpAffine", getitem)
    assert len(resizes) == 4 and setitems
    for resize in resizes:  # every tile reaches the canvas, and the canvas the warp
        assert flows(dag, resize.id, warp.id)
    concat = first(dag, "numpy.concatenate", getitem)  # the tiles' labels, named and linked
    assert concat.args is not None and dag.dataflow_successors(concat.id)


def test_compose_transforms_chain() -> None:
    dag, _ = traced("compose", img_size=64)
    getitem = f"{PKG}.compose.ComposeDataset.__getitem__"
    sample_chain(dag, getitem, "cv2.imdecode", "cv2.cvtColor", "cv2.resize", "operator.getitem")
    normalize = first(dag, f"{PKG}.transforms.Normalize.apply", f"{getitem}#0/")
    assert flows(dag, first(dag, "cv2.resize", f"{getitem}#0/").id, normalize.id)


def test_mel_pipeline_chain() -> None:
    pytest.importorskip("librosa")
    dag, batch = traced("mel")
    getitem = f"{PKG}.mel.MelDataset.__getitem__"
    sample_chain(
        dag,
        getitem,
        f"{PKG}.mel.crop_or_pad",
        "librosa.feature.spectral.melspectrogram",
        "librosa.core.spectrum.power_to_db",
        "operator.truediv",  # min-max normalization
        "torch.from_numpy",
    )
    assert batch[0].dtype == torch.float32


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("name", "options"),
    [("compose", {"img_size": 64}), ("yolo_mosaic", {"img_size": 96, "hyp": {"mosaic": 1.0}})],
)
@pytest.mark.slow
def test_worker_replay_equals_the_workers_batch(name, options) -> None:
    dag, replayed = traced(name, num_workers=2, **options)
    assert dag.metadata["dataloader"]["reproduced_in_process"] is True
    real = next(iter(pipelines.make_loader(name, batch_size=2, num_workers=2, **options)))
    assert len(real) == len(replayed)
    for a, b in zip(real, replayed, strict=True):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)
        else:
            assert a == b
