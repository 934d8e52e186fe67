"""Call descriptions (the tracer's ``CallNode.args`` format) of common calls, for calibration tests."""

from __future__ import annotations

import base64
import random
from typing import Any

import numpy as np

from codedag.calibrate import Stopwatch
from codedag.graph.model import ExecutionDAG


def array(
    name: str, shape: list[int], dtype: str, data: np.ndarray | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name, "kind": "array", "type": "numpy.ndarray", "shape": shape, "dtype": dtype,
        "layout": "C",
    }  # fmt: skip
    if data is not None:
        entry["data"] = base64.b64encode(np.ascontiguousarray(data).tobytes()).decode()
    return entry


def scalar(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "kind": "scalar", "value": value}


def pair(name: str, a: int, b: int) -> dict[str, Any]:
    items = [{"kind": "scalar", "value": a}, {"kind": "scalar", "value": b}]
    return {"name": name, "kind": "sequence", "type": "tuple", "items": items}


WARP_M = np.array([[0.9, 0.1, 5.0], [-0.1, 0.9, 3.0]], np.float64)


def pipeline_dag(with_audio: bool = True) -> ExecutionDAG:
    """A small DAG of library calls with recorded arguments, as the tracer writes them."""
    dag = ExecutionDAG()
    root = dag.add_call(name="pipe.Dataset.__getitem__", context_key="g#0", total_ns=10**7)

    def call(name: str, args: list[dict[str, Any]], i: int = 0) -> int:
        node = dag.add_call(
            name=name, context_key=f"g#0/{name}#{i}", depth=1, total_ns=10**6, self_ns=10**6,
            is_builtin=True, args=args,
        )  # fmt: skip
        dag.add_edge(root, node, "calls")
        return node

    call("cv2.warpAffine", [array("0", [240, 320, 3], "uint8"),
                            array("1", [2, 3], "float64", WARP_M), pair("2", 160, 120)])  # fmt: skip
    call("cv2.cvtColor", [array("0", [120, 160, 3], "uint8"), scalar("1", 4)])
    call("numpy.clip", [array("0", [256], "float64"), scalar("1", 0), scalar("2", 255)])
    if with_audio:
        call("librosa.feature.melspectrogram",
             [array("y", [44100], "float32"), scalar("sr", 22050), scalar("n_mels", 64)])  # fmt: skip
    return dag


class NoisyStopwatch(Stopwatch):
    """Multiplies every measured time by a factor drawn uniformly from [1 - noise, 1 + noise]."""

    def __init__(self, noise: float, seed: int) -> None:
        super().__init__()
        self.noise = noise
        self.rng = random.Random(seed)

    def __call__(self, fn: Any) -> int:
        return int(super().__call__(fn) * self.rng.uniform(1 - self.noise, 1 + self.noise))
