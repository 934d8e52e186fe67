"""Shared helpers of the migration tests, in one place.

* tiny exact backends and a registry of them, plan builders: for the tests of the migration
  machinery, which must not depend on which library backends exist;
* hypothesis settings, the device list and fixture, random arrays and image batches;
* :func:`assert_matches`: a result against the library's, within the tolerance table.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import cv2
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from numpy.exceptions import TooHardError

from codedag.backends.registry import Registry, spec_from_backend
from codedag.backends.tolerances import tolerance_for
from codedag.errors import UnsupportedOperation

# Modest example counts: these suites run on a shared 2-core machine. CI runs a fixed example set
# (the "ci" profile of tests/support/hypothesis_profiles.py derandomizes hypothesis); the
# "nightly" profile multiplies the counts.
PROPS = settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
FEW = settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
SETTINGS = settings(
    max_examples=examples(int(os.environ.get("CV2_EXAMPLES", "15"))),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
CV2_BORDERS = (
    cv2.BORDER_CONSTANT,
    cv2.BORDER_REPLICATE,
    cv2.BORDER_REFLECT,
    cv2.BORDER_WRAP,
    cv2.BORDER_REFLECT_101,
)
"""cv2's border types that every border-taking cv2 backend reproduces."""

CALLS: dict[str, int] = {"flip": 0, "add": 0, "clip": 0, "boom": 0}


def flip(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """cv2.flip on a batch (N, H, W[, C])."""
    CALLS["flip"] += 1
    if dst is not None:
        raise UnsupportedOperation("dst")
    if flipCode == 0:
        return src.flip(1)
    if flipCode > 0:
        return src.flip(2)
    return src.flip(1).flip(2)


def add(src1: torch.Tensor, src2: Any, dst: Any = None, mask: Any = None, dtype: int = -1) -> Any:
    """cv2.add of two uint8 batches with saturation."""
    CALLS["add"] += 1
    if mask is not None or dtype != -1 or not isinstance(src2, torch.Tensor):
        raise UnsupportedOperation("only two arrays")
    if src1.dtype != torch.uint8 or src2.dtype != torch.uint8:
        raise UnsupportedOperation("uint8 only")
    return (src1.to(torch.int16) + src2.to(torch.int16)).clamp(0, 255).to(torch.uint8)


def clip(a: torch.Tensor, a_min: Any = None, a_max: Any = None, out: Any = None) -> torch.Tensor:
    """numpy.clip for float arrays with scalar bounds (dtype preserved)."""
    CALLS["clip"] += 1
    if not a.is_floating_point():
        raise UnsupportedOperation("floats only")
    return a.clamp(a_min, a_max)


def sin(x: torch.Tensor, out: Any = None) -> torch.Tensor:
    """numpy.sin for float arrays (a ufunc: its replacement is a proxy object)."""
    return torch.sin(x)


def boom(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """A backend that always fails."""
    CALLS["boom"] += 1
    raise RuntimeError("injected failure")


def make_registry(**overrides: Any) -> Registry:
    """A registry with cv2.flip, cv2.add and numpy.clip test backends (overridable)."""
    backends = {"cv2.flip": flip, "cv2.add": add, "numpy.clip": clip, **overrides}
    registry = Registry()
    for name, backend in backends.items():
        module = name.split(".", 1)[0]
        registry.register(spec_from_backend(name, backend, module))
    return registry


def plan_for(mapping: dict[str, Any], calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A contract plan dict from ``{context key: device}``."""
    return {
        "schema_version": 1,
        "codedag_version": "0.1.0",
        "k": 2,
        "gpu_count": 1,
        "target_device": "cpu",
        "partition_device_map": {"0": "cpu", "1": "cpu"},
        "context_device_map": dict(mapping),
        "calls": list(calls or []),
        "notes": [],
    }


# -- devices, arrays, comparison ------------------------------------------------------------


@pytest.fixture(name="device", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device_fixture(request: pytest.FixtureRequest) -> torch.device:
    """Every backend test runs on the CPU here and on CUDA under ``pytest -m gpu``.

    Import ``device_fixture`` into a test module to use the ``device`` fixture there.
    """
    return torch.device(request.param)


def to_dev(a: np.ndarray, device: torch.device | str) -> torch.Tensor:
    """A NumPy array as a tensor on ``device`` (same dtype and shape)."""
    return torch.from_numpy(np.array(a, copy=True, order="C")).to(device)


def random_array(seed: int, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """Values over the whole range of small integer dtypes, moderate values for the others."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        if dt.itemsize == 1:
            lo, hi = int(info.min), int(info.max)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dt)
    return (rng.standard_normal(shape) * 10).astype(dt)


def audio_signal(seed: int, n: int, length: int) -> np.ndarray:
    """``n`` test signals of ``length`` samples, amplitude <= 1: noise plus tones."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(-1, 1, (n, length)).astype(np.float32)
    t = np.arange(length) / 8000.0
    y[:, length // 3 :] *= 0.01  # a quiet tail exercises the small bins
    return (0.5 * y + 0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


@st.composite
def batches(
    draw: st.DrawFn,
    dtypes: Sequence[Any] = (np.uint8, np.float32),
    channels: Sequence[int] = (1, 3, 4),
    min_side: int = 1,
    max_side: int = 24,
    max_n: int = 3,
    scale: float = 255.0,
    offset: float = 0.0,
) -> np.ndarray:
    """A batch (N,H,W) or (N,H,W,C) of random images; float images span offset..offset+scale."""
    n = draw(st.integers(1, max_n))
    h = draw(st.integers(min_side, max_side))
    w = draw(st.integers(min_side, max_side))
    dtype = draw(st.sampled_from(list(dtypes)))
    c = draw(st.sampled_from(list(channels)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if np.dtype(dtype) == np.uint8:
        arr = rng.integers(0, 256, (n, h, w, c)).astype(np.uint8)
    else:
        arr = (rng.random((n, h, w, c)) * scale + offset).astype(dtype)
    return arr[..., 0] if c == 1 else arr


def assert_matches(
    actual: Any,
    expected: Any,
    name: str,
    *,
    dtype: bool = True,
) -> None:
    """Assert ``actual`` (tensor or array) equals the library's ``expected`` within
    ``tolerance_for(name)``: same shape (and dtype), NaN where the library has NaN."""
    tol = tolerance_for(name)
    if isinstance(actual, torch.Tensor):
        actual = actual.detach().cpu().resolve_conj().resolve_neg().numpy()
    got = np.asarray(actual)
    exp = np.asarray(expected)
    assert got.shape == exp.shape, f"{name}: shape {got.shape} != library {exp.shape}"
    if dtype:
        assert got.dtype == exp.dtype, f"{name}: dtype {got.dtype} != library {exp.dtype}"
    if exp.dtype == np.bool_ or got.dtype == np.bool_:
        bad = got != exp
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} booleans differ"
        return
    g = got.astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    e = exp.astype(np.complex128 if np.iscomplexobj(exp) else np.float64)
    nan_g, nan_e = np.isnan(g), np.isnan(e)
    assert (nan_g == nan_e).all(), f"{name}: NaN positions differ"
    with np.errstate(invalid="ignore"):
        same = (g == e) | nan_e
        diff = np.where(same, 0.0, np.abs(g - e))
    allowed = tol.allowed(e)
    bad = diff > allowed
    if not bad.any():
        return
    frac = float(bad.mean())
    worst = float(diff[bad].max())
    assert frac <= tol.max_mismatch_frac and worst <= tol.mismatch_atol, (
        f"{name}: {int(bad.sum())} of {bad.size} elements ({frac:.2%}) outside "
        f"atol={tol.atol} rtol={tol.rtol}; worst difference {worst:g} "
        f"(allowed {tol.max_mismatch_frac:.2%} up to {tol.mismatch_atol})"
    )


# -- PIL images ------------------------------------------------------------------------------

PIL_MODES = {"L": (), "LA": (2,), "RGB": (3,), "RGBA": (4,)}
"""The PIL modes the backends take, with the trailing shape of their arrays."""


@st.composite
def pil_images(draw: st.DrawFn, max_side: int = 40) -> list[Any]:
    """1 to 3 equally sized PIL images of one mode: noise, or smooth ramps."""
    from PIL import Image

    mode = draw(st.sampled_from(sorted(PIL_MODES)))
    w, h = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    n = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    arrays = rng.integers(0, 256, (n, h, w, *PIL_MODES[mode]), dtype=np.uint8)
    if draw(st.booleans()):  # smooth content as well as noise
        yy, xx = np.mgrid[0:h, 0:w]
        ramp = ((xx * 7 + yy * 3) % 256).astype(np.uint8)
        arrays = np.broadcast_to(ramp.reshape(1, h, w, *([1] * len(PIL_MODES[mode]))), arrays.shape)
    return [Image.fromarray(np.ascontiguousarray(a), mode=mode) for a in arrays]


def assert_pil_matches(got: Any, expected: list[Any], name: str) -> None:
    """A ``PILBatch`` against Pillow's images: same mode, pixels within the tolerance table."""
    assert got.mode == expected[0].mode
    assert_matches(got.data, np.stack([np.asarray(e) for e in expected]), name)


def pil_kernels() -> list[Any]:
    """Pillow's built-in 3x3 and 5x5 kernel filters."""
    from PIL import ImageFilter

    names = "BLUR CONTOUR DETAIL EDGE_ENHANCE EDGE_ENHANCE_MORE EMBOSS FIND_EDGES SHARPEN SMOOTH"
    return [getattr(ImageFilter, n) for n in (*names.split(), "SMOOTH_MORE")]


def check_batch(
    name: str,
    batch: np.ndarray,
    reference: Callable[[np.ndarray], np.ndarray],
    backend: Callable[[torch.Tensor], torch.Tensor],
    device: str,
) -> None:
    """Run ``backend`` on the whole batch on ``device`` and compare with ``reference`` per image."""
    ref = np.stack([reference(np.ascontiguousarray(img)) for img in batch])
    out = backend(torch.from_numpy(batch).to(device))
    assert isinstance(out, torch.Tensor), f"{name}: backend returned {type(out).__name__}"
    assert out.device.type == torch.device(device).type
    assert_matches(out, ref, name)


# -- conformance: one call through the migrated path against the library -------------------

OUTCOMES = ("identical", "tolerance", "unsupported", "exception", "differs", "failed")
"""identical: same values; tolerance: within the tolerance table; unsupported: declared before
the backend ran (the original runs); exception: the library's exception class; differs: declared
to differ (random draws: same types, shapes, dtypes); failed: anything else."""


@dataclass
class Tally:
    """Conformance counts per outcome, per function, and the failures' descriptions."""

    counts: Counter[str] = field(default_factory=Counter)
    names: set[str] = field(default_factory=set)
    reasons: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def add(self, name: str, label: str, outcome: str, detail: str) -> None:
        self.counts[outcome] += 1
        self.names.add(name)
        if outcome == "unsupported":
            self.reasons[f"{name}: {detail}"] += 1
        if outcome == "failed":
            self.failures.append(f"{name} [{label}]: {detail}")

    def lines(self) -> list[str]:
        """The summary printed at the end of a test session."""
        total = sum(self.counts.values())
        head = f"conformance: {len(self.names)} functions x {total} cases: " + ", ".join(
            f"{self.counts[o]} {o}" for o in OUTCOMES
        )
        return [head]


TALLY = Tally()


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, tuple | list):
        out = [(f"{path}:{type(value).__name__}[{len(value)}]", type(value))]
        for i, v in enumerate(value):
            out.extend(_leaves(v, f"{path}[{i}]"))
        return out
    return [(path or "result", value)]


def _arrays(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, tuple | list):
        return [a for v in value for a in _arrays(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arrays(v)]
    return []


def _as_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().resolve_conj().resolve_neg().numpy()
    module = type(value).__module__
    if module.startswith("PIL."):
        return np.asarray(value)
    return None


def compare_values(name: str, got: Any, want: Any) -> tuple[str, str]:
    """``("identical" | "tolerance" | "failed", detail)`` of a result against the library's."""
    g_leaves, w_leaves = _leaves(got), _leaves(want)
    if [p for p, _ in g_leaves] != [p for p, _ in w_leaves]:
        return "failed", f"structure {[p for p, _ in g_leaves]} != {[p for p, _ in w_leaves]}"
    worst = "identical"
    for (path, g), (_, w) in zip(g_leaves, w_leaves):
        if isinstance(w, type):
            continue
        if type(g) is not type(w):
            return (
                "failed",
                f"{path}: {type(g).__name__} where the library gives {type(w).__name__}",
            )
        if type(w).__module__.startswith("PIL.") and (g.mode, g.size) != (w.mode, w.size):
            return "failed", f"{path}: PIL {g.mode} {g.size} != {w.mode} {w.size}"
        if isinstance(w, torch.Tensor) and g.device != w.device:
            return "failed", f"{path}: on {g.device}, the library's on {w.device}"
        ga, wa = _as_array(g), _as_array(w)
        if wa is None or ga is None:
            if isinstance(w, float) and isinstance(g, float):
                ga, wa = np.asarray(g), np.asarray(w)
            elif g != w:
                return "failed", f"{path}: {g!r} != {w!r}"
            else:
                continue
        if ga.shape != wa.shape or ga.dtype != wa.dtype:
            return "failed", f"{path}: {ga.dtype} {ga.shape} != library {wa.dtype} {wa.shape}"
        arrays = isinstance(w, np.ndarray) and isinstance(g, np.ndarray)
        if arrays and name not in LAYOUT_DIFFERS and layout_of(g) != layout_of(w):
            return "failed", f"{path}: layout {layout_of(g)}, the library's {layout_of(w)}"
        kind = _value_kind(name, ga, wa)
        if kind.startswith("failed"):
            return "failed", f"{path}: {kind[7:]}"
        if kind == "tolerance":
            worst = "tolerance"
    return worst, ""


LAYOUT_DIFFERS: dict[str, str] = {}
"""Functions whose results' layout (not values) still differs from the library's, and why."""


def layout_of(array: np.ndarray) -> tuple[str, ...]:
    """What of an array's memory layout code can see: C and F contiguity as NumPy flags them
    (an axis of length 1 counts for neither) and its axes of stride 0 (broadcast views; an empty
    array's strides say nothing)."""
    flags = [name for name in ("C", "F") if array.flags[f"{name}_CONTIGUOUS"]]
    zero = [
        f"axis {i} stride 0"
        for i, (n, s) in enumerate(zip(array.shape, array.strides))
        if n > 1 and not s and array.size
    ]
    return tuple(flags + zero) or ("strided",)


def _value_kind(name: str, got: np.ndarray, want: np.ndarray) -> str:
    if want.dtype.kind in "OSUV" or got.dtype.kind in "OSUV":
        return "identical" if np.array_equal(got, want) else "failed: values differ"
    if want.dtype == np.bool_:
        bad = int((got != want).sum())
        return "identical" if not bad else f"failed: {bad} of {want.size} booleans differ"
    kind = np.complex128 if want.dtype.kind == "c" or got.dtype.kind == "c" else np.float64
    g, w = got.astype(kind), want.astype(kind)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if (nan_g != nan_w).any():
        return f"failed: NaN at {int((nan_g != nan_w).sum())} positions where the library has none"
    with np.errstate(invalid="ignore", over="ignore"):
        same = (g == w) | nan_w
    if same.all():
        return "identical"
    tol = tolerance_for(name)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(g - w))
    allowed = tol.allowed(w)
    bad = ~(diff <= allowed)
    if not bad.any():
        return "tolerance"
    frac = float(bad.mean())
    worst = float(np.nanmax(np.where(bad, diff, 0.0))) if np.isfinite(diff[bad]).all() else np.inf
    if frac <= tol.max_mismatch_frac and worst <= tol.mismatch_atol:
        return "tolerance"
    return (
        f"failed: {int(bad.sum())} of {bad.size} values ({frac:.2%}) beyond atol={tol.atol} "
        f"rtol={tol.rtol}, worst {worst:g} (allowed {tol.max_mismatch_frac:.2%} up to "
        f"{tol.mismatch_atol})"
    )


OVERLAP_WORK = 10_000
"""Effort bound of the exact overlap test: exact overlap of strided arrays is exponential."""


def shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` overlap, fast on every layout.

    Disjoint memory bounds answer at once; overlapping bounds go to the exact test with bounded
    work, and a problem too hard to solve within it counts as sharing (the conservative answer:
    views of one buffer with interleaved strides are the only arrays that get there).
    """
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=OVERLAP_WORK))
    except TooHardError:
        return True


def _snapshot(values: list[np.ndarray]) -> list[np.ndarray]:
    return [v.copy() for v in values]


def _unchanged(before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    return all(np.array_equal(b, a, equal_nan=b.dtype.kind in "fc") for b, a in zip(before, after))


Case = Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
"""Builds a call's arguments afresh (same layouts and values every time)."""


def conform(name: str, case: Case, device: str = "cpu", registry: Any = None) -> tuple[str, str]:
    """Run one call through the migrated path and through the library; the outcome and why.

    The migrated path is refused before its backend (declared unsupported), or must raise the
    library's exception class, or return what the library returns (types, shapes, dtypes, layout,
    values within the tolerance table) without sharing memory with an input where the library
    does not, and without writing into inputs it does not declare in place.
    """
    from codedag.backends.contract import Fidelity
    from codedag.backends.device_values import ValueConverter
    from codedag.backends.executor import Executor
    from codedag.backends.probe import original_function
    from codedag.backends.registry import default_registry

    registry = registry or default_registry()
    spec = registry.get(name)
    assert spec is not None, name
    original = original_function(name)
    # "cpu-staged": the CPU through the conversions of a device that shares no memory with the
    # host (staging buffers, device cache, copies back), as CUDA takes them.
    staged = device == "cpu-staged"
    device = "cpu" if staged else device
    converter = ValueConverter(device, zero_copy=False) if staged else ValueConverter(device)
    executor = Executor(spec, original, {device: converter})
    args, kwargs = case()
    # Refused calls run the original unchanged, whatever it does (some hang in the library:
    # cv2.copyMakeBorder reflecting an empty image loops forever), so it is not called here.
    reason = executor.refusal(args, kwargs)
    if reason is not None:
        return "unsupported", reason
    want: Any = None
    want_error: BaseException | None = None
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = original(*args, **kwargs)
    except Exception as e:
        want_error = e
    want_alias = {
        i
        for i, out in enumerate(_arrays(want))
        if any(shares_memory(out, a) for a in _arrays((args, kwargs)))
    }
    args, kwargs = case()
    inputs = _arrays((args, kwargs))
    before = _snapshot(inputs)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = executor.run(args, dict(kwargs), device)
    except Exception as e:
        if want_error is not None and isinstance(e, type(want_error)):
            return "exception", type(e).__name__
        where = f"the library raises {type(want_error).__name__}" if want_error else "the library"
        return "failed", f"{type(e).__name__}: {str(e)[:160]} (hidden by the fallback; {where})"
    if want_error is not None:
        return "failed", f"returned where the library raises {type(want_error).__name__}: " + str(
            want_error
        )[:120].replace("\n", " ")
    if not spec.quirks.inplace and not _unchanged(before, inputs):
        return "failed", "wrote into an input"
    for i, out in enumerate(_arrays(got)):
        if i not in want_alias and any(shares_memory(out, a) for a in inputs):
            return "failed", "result shares memory with an input; the library's does not"
    if spec.quirks.fidelity is Fidelity.DIFFERS:
        kind, detail = compare_values(name, _structure_only(got), _structure_only(want))
        if kind == "failed":
            return kind, detail
        outside = outside_support(name, got, args, kwargs, before)
        return ("failed", outside) if outside else ("differs", "")
    return compare_values(name, got, want)


def _rows(a: np.ndarray) -> list[bytes]:
    return sorted(np.ascontiguousarray(r).tobytes() for r in np.asarray(a))


def outside_support(
    name: str, got: Any, args: tuple[Any, ...], kwargs: dict[str, Any], before: list[np.ndarray]
) -> str:
    """Why a random draw is not one the library could have made ('' when it could): values in the
    distribution's range, permutations of the input, choices from the population."""
    fn = name.rsplit(".", 1)[-1]
    bound = dict(kwargs)
    with np.errstate(all="ignore"):
        if fn in ("rand", "random", "random_sample"):
            ok = ((got >= 0) & (got < 1)).all()
        elif fn in ("randn", "normal"):
            ok = np.isfinite(got).all() or not np.isfinite(np.asarray(args, dtype=object)).all()
        elif fn == "uniform":
            low = args[0] if args else bound.get("low", 0.0)
            high = args[1] if len(args) > 1 else bound.get("high", 1.0)
            lo, hi = np.minimum(low, high), np.maximum(low, high)
            ok = ((got >= lo) & (got <= hi)).all()
        elif fn == "randint":
            low = args[0] if args else bound["low"]
            high = args[1] if len(args) > 1 else bound.get("high")
            lo, hi = (0, low) if high is None else (low, high)
            ok = ((got >= lo) & (got < hi)).all()
        elif fn == "shuffle":
            ok = _rows(args[0]) == _rows(before[0])
        elif fn == "permutation":
            x = args[0]
            ok = _rows(got) == (_rows(np.arange(x)) if isinstance(x, int) else _rows(before[0]))
        elif fn == "choice":
            a = args[0]
            population = np.arange(a) if isinstance(a, int) else np.asarray(a)
            ok = np.isin(got, population).all()
            if not bound.get("replace", True):
                ok = ok and len(np.unique(got)) == np.size(got)
        else:
            return ""
    return "" if ok else f"{fn}: values the library could not draw"


def _structure_only(value: Any) -> Any:
    """Arrays as zeros of their dtype and shape: what a declared random op must still match."""
    if isinstance(value, np.ndarray):
        return np.zeros(value.shape, value.dtype)
    if isinstance(value, np.generic):
        return type(value)(0)
    if isinstance(value, tuple | list):
        return type(value)(_structure_only(v) for v in value)
    return value


def refusal(name: str, *args: Any, **kwargs: Any) -> str | None:
    """Why the declaration of ``name`` refuses this library call (library values in), or None."""
    from codedag.backends.executor import Executor
    from codedag.backends.probe import original_function
    from codedag.backends.registry import default_registry

    spec = default_registry().get(name)
    assert spec is not None, name
    return Executor(spec, original_function(name), {}).refusal(args, kwargs)


# -- conformance corpus ingredients ------------------------------------------------------------

Args = tuple[tuple[Any, ...], dict[str, Any]]
Params = list[tuple[str, tuple[Any, ...], dict[str, Any]]]
Labeled = list[tuple[str, Callable[[], Args]]]

ALL_DTYPES = (
    "uint8",
    "int8",
    "uint16",
    "int16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bool",
    "complex64",
)
LAYOUTS = ("C", "F", "strided", "reversed", "readonly")


def array(
    shape: tuple[int, ...],
    dtype: str = "uint8",
    layout: str = "C",
    *,
    seed: int = 0,
    scale: float = 255.0,
    special: bool = False,
) -> np.ndarray:
    """A deterministic array of ``shape`` and ``dtype`` in the given memory layout.

    Integers span their type's range (small types) or +-1000; floats span 0..scale; ``special``
    puts NaN, inf and -inf into float arrays.
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    wide = tuple(s * 2 if i == 1 and layout == "strided" else s for i, s in enumerate(shape))
    if dt == np.bool_:
        a = rng.integers(0, 2, wide).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (int(info.min), int(info.max)) if dt.itemsize <= 2 else (-1000, 1000)
        a = rng.integers(max(lo, int(info.min)), min(hi, int(info.max)), wide, endpoint=True)
        a = a.astype(dt)
    elif dt.kind == "c":
        a = (rng.random(wide) * scale + 1j * rng.random(wide) * scale).astype(dt)
    else:
        a = (rng.random(wide) * scale).astype(dt)
        if special and a.size >= 3:
            flat = a.reshape(-1)
            flat[:: max(1, a.size // 3)][:3] = [np.nan, np.inf, -np.inf][
                : len(flat[:: max(1, a.size // 3)][:3])
            ]
    a = np.asarray(a)  # a 0-d array, not a NumPy scalar
    if layout == "strided" and len(shape) > 1:
        a = a[:, ::2]
    elif layout == "F":
        a = np.asfortranarray(a)
    elif layout == "reversed" and a.ndim:
        a = a[::-1]
    elif layout == "readonly":
        a.flags.writeable = False
    return a


T = TypeVar("T")


def call_within(seconds: float, func: Callable[[], T]) -> T:
    """``func()``, failing the test if it has not returned after ``seconds`` (it may hang)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = func()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"{getattr(func, '__name__', func)} still blocked after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)
