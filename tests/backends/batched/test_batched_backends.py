"""The batched executor's view of a backend: data parameters, per-sample ones, and the call."""

from __future__ import annotations

import numpy as np
import torch

import codedag.backends.batched.backends as backends
from codedag.backends.batched.backends import Backend, backend_for


def test_cv2_views_name_the_data_and_per_sample_parameters() -> None:
    resize = backend_for("cv2.resize")
    assert resize is not None
    assert resize.positional[:2] == ("src", "dsize")
    assert resize.data == frozenset({"src"}) and resize.batch_first and resize.squeeze_channel
    warp = backend_for("cv2.warpAffine")
    assert warp is not None and warp.per_sample == frozenset({"M"})
    assert not warp.per_sample & warp.data


def test_numpy_elementwise_is_not_batch_first_and_draws_get_the_device() -> None:
    clip = backend_for("numpy.clip")
    assert clip is not None and not clip.batch_first
    rand = backend_for("numpy.random.rand")
    assert rand is not None and rand.inject == {"device": "DEVICE"}


def test_unknown_functions_have_no_view_and_lookups_are_cached() -> None:
    assert backend_for("not.a.function") is None
    assert backend_for("cv2.flip") is backend_for("cv2.flip")
    first = backend_for("cv2.flip")
    backends.clear_cache()
    assert backend_for("cv2.flip") is not first


def test_a_batch_runs_through_the_same_backend() -> None:
    resize = backend_for("cv2.resize")
    assert resize is not None
    images = torch.zeros((3, 8, 8, 3), dtype=torch.uint8)
    out = resize.call([images, (4, 6)], {}, torch.device("cpu"))
    assert tuple(out.shape) == (3, 6, 4, 3)


def test_call_maps_values_renames_keywords_and_injects_the_device() -> None:
    seen: dict[str, object] = {}

    def function(x: object, mode: str, **kwargs: object) -> str:
        seen.update(x=x, mode=mode, **kwargs)
        return "done"

    backend = Backend(
        name="lib.f",
        function=function,
        positional=("x", "mode"),
        data=frozenset({"x"}),
        per_sample=frozenset(),
        inject={"device": "DEVICE", "fixed": 1},
        renames={"border": "padding"},
        value_maps={"mode": {0: "nearest"}, "border": {4: "reflect"}},
        batch_first=True,
    )
    device = torch.device("cpu")
    assert backend.call(["data", 0], {"border": 4}, device) == "done"
    assert seen == {
        "x": "data",
        "mode": "nearest",
        "padding": "reflect",
        "device": device,
        "fixed": 1,
    }
    assert backend.refusal((), {}) is None


def test_refusal_reports_the_declared_check() -> None:
    backend = Backend(
        "lib.f", print, (), frozenset(), frozenset(), {}, {}, {}, True,
        refuse=lambda args, kwargs: "too small" if args[0] < 2 else None,
    )  # fmt: skip
    assert backend.refusal((1,), {}) == "too small"
    assert backend.refusal((3,), {}) is None


def test_resize_refuses_what_its_declaration_refuses() -> None:
    resize = backend_for("cv2.resize")
    assert resize is not None
    image = np.zeros((8, 8, 3), np.uint8)
    assert resize.refusal((image, (4, 4)), {}) is None
    assert resize.refusal((image, (4, 4)), {"bogus": 1}) is not None
