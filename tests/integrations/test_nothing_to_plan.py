"""nothing_to_plan: which traced samples the planner is not even imported for."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.integrations.autoplan import nothing_to_plan
from codedag.trace.dataloader import trace_first_batch
from codedag.trace.tracer import EnhancedTracer


class _Samples(Dataset):  # type: ignore[type-arg]
    def __init__(self, make: Any) -> None:
        self.make = make
        self.x = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)
        self.a = np.arange(8 * 6, dtype=np.uint8).reshape(8, 6)

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        return self.make(self, i)


def _reason(make: Any) -> str | None:
    tracer = EnhancedTracer()
    trace_first_batch(DataLoader(_Samples(make), batch_size=4), tracer, samples=2)
    return nothing_to_plan(tracer.dag)


def test_slicing_tensors_in_memory_and_collating_them_is_nothing_to_plan() -> None:
    reason = _reason(lambda d, i: (d.x[i, :4] * 2, i % 3))
    assert reason is not None and "no function" in reason


def test_a_torch_function_of_the_samples_own_code_may_be_planned() -> None:
    interpolate = torch.nn.functional.interpolate
    assert _reason(lambda d, i: interpolate(d.x[None, None, i], size=12)[0, 0]) is None


def test_an_operator_on_an_array_in_memory_may_be_planned() -> None:
    assert _reason(lambda d, i: torch.from_numpy(d.a[i] * 2)) is None


def test_a_library_call_may_be_planned() -> None:
    assert _reason(lambda d, i: torch.from_numpy(np.clip(d.a[i], 3, 9))) is None


def test_a_plan_is_likely_where_the_script_imported_a_library_besides_numpy(
    monkeypatch: Any,
) -> None:
    import sys

    import skimage.io  # noqa: F401  # imported by an earlier test as well: taken out below

    from codedag.backends.libraries import library_facts
    from codedag.integrations import prefetch

    others = {m for f in library_facts() for m in f.modules} - {"numpy", "torch", "random", "scipy"}
    assert {"cv2", "PIL", "librosa", "skimage"} <= others
    for name in [k for k in sys.modules if k.split(".")[0] in others]:
        monkeypatch.delitem(sys.modules, name)
    assert "numpy" in sys.modules and "torch" in sys.modules
    assert not prefetch.likely_to_plan()
    monkeypatch.setitem(sys.modules, "cv2", np)  # any module object stands for it
    assert prefetch.likely_to_plan()
