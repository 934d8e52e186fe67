"""Conformance corpus of the NumPy ops: every dtype (bool, ints, uints, floats, complex), 0-d,
empty and broadcast shapes, layouts, NaN and inf, Python scalars where NumPy takes them, and the
parameters of each function (axes, keepdims, ddof, q, pad modes, norms, sizes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from migrate_support import LAYOUTS, Args, Labeled, array

from codedag.backends.ops.numpy import elementwise

NUMERIC = (
    "bool",
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
    "complex64",
    "complex128",
)
SHAPE = (3, 4)


def _a(
    dtype: str = "float32",
    shape: tuple[int, ...] = SHAPE,
    layout: str = "C",
    seed: int = 0,
    special: bool = False,
    scale: float = 10.0,
) -> np.ndarray:
    """An array whose floats span -scale..scale (NaN/inf with ``special``)."""
    a = array(shape, dtype, layout if len(shape) > 1 else "C", seed=seed, scale=2 * scale)
    if a.dtype.kind in "fc":
        a = np.asarray(a - np.asarray(scale, dtype=a.dtype))
        if special and a.size >= 3:
            flat = a.reshape(-1)
            flat[[0, a.size // 2, -1]] = [np.nan, np.inf, -np.inf]
        if layout == "readonly":
            a.flags.writeable = False
    return a


def _case(label: str, build: Callable[[], Args]) -> tuple[str, Callable[[], Args]]:
    return label, build


def _arrays(seed: int = 0) -> list[tuple[str, Callable[[], np.ndarray]]]:
    """One array per dtype, shape, layout and special-values variant."""
    out: list[tuple[str, Callable[[], np.ndarray]]] = []
    for dtype in NUMERIC:
        out.append((dtype, lambda dtype=dtype: _a(dtype, seed=seed)))
    for shape in ((), (5,), (0, 3), (2, 3, 4)):
        out.append((f"float32 {shape}", lambda shape=shape: _a("float32", shape, seed=seed)))
    for layout in LAYOUTS[1:]:
        out.append((f"float32 {layout}", lambda layout=layout: _a("float32", layout=layout)))
    out.append(("float64 nan/inf", lambda: _a("float64", special=True, seed=seed)))
    out.append(("int16 0-d", lambda: _a("int16", ())))
    return out


def _unary(name: str) -> Labeled:
    fn = name.split(".")[-1]
    cases = [_case(label, lambda make=make: ((make(),), {})) for label, make in _arrays()]
    cases += [
        _case("python int", lambda: ((3,), {})),
        _case("python float", lambda: ((2.5,), {})),
        _case("python complex", lambda: ((3 + 4j,), {})),
        _case("list", lambda: (([1.0, -2.0, 3.5],), {})),
        _case("out=", lambda: ((_a(),), {"out": np.empty(SHAPE, np.float32)})),
        _case("where=", lambda: ((_a(),), {"where": _a("bool")})),
        _case("dtype=float64", lambda: ((_a("float32"),), {"dtype": np.float64})),
        _case("complex abs", lambda: ((np.array([3 + 4j, 1 - 1j], np.complex64),), {})),
    ]
    if fn in ("sqrt", "log", "log2", "log10", "arccos", "arcsin", "arccosh", "arctanh"):
        cases.append(_case("domain", lambda: ((np.array([-1.0, 0.0, 0.5, 2.0]),), {})))
    return cases


def _binary(name: str) -> Labeled:
    cases: Labeled = []
    for dtype in NUMERIC:
        cases.append(_case(f"{dtype} pair", lambda d=dtype: ((_a(d), _a(d, seed=1)), {})))
    pairs = [("uint8", "float32"), ("int8", "uint8"), ("int64", "float32"), ("bool", "int16")]
    for a, b in pairs:
        cases.append(_case(f"{a}+{b}", lambda a=a, b=b: ((_a(a), _a(b, seed=1)), {})))
    cases += [
        _case("uint8 + 3", lambda: ((_a("uint8"), 3), {})),
        _case("uint8 + 300", lambda: ((_a("uint8"), 300), {})),
        _case("uint8 + -1", lambda: ((_a("uint8"), -1), {})),
        _case("uint8 + 1.5", lambda: ((_a("uint8"), 1.5), {})),
        _case("2 + float32", lambda: ((2, _a("float32")), {})),
        _case("2.5 + int32", lambda: ((2.5, _a("int32")), {})),
        _case("broadcast", lambda: ((_a("float32"), _a("float32", (4,), seed=2)), {})),
        _case("mismatch", lambda: ((_a("float32"), _a("float32", (5,))), {})),
        _case("empty", lambda: ((_a("float32", (0, 4)), _a("float32", (0, 4))), {})),
        _case("0-d", lambda: ((_a("float64", ()), _a("float64", (), seed=3)), {})),
        _case("nan/inf", lambda: ((_a("float64", special=True), _a("float64", seed=1)), {})),
        _case("int zero divisor", lambda: ((_a("int32"), np.zeros(SHAPE, np.int32)), {})),
        _case("F layout", lambda: ((_a(layout="F"), _a(layout="strided")), {})),
        _case("scalars only", lambda: ((2, 3), {})),
        _case("out=", lambda: ((_a(), _a()), {"out": np.empty(SHAPE, np.float32)})),
        _case("uint64 pair", lambda: ((_a("uint64"), _a("uint64", seed=1)), {})),
    ]
    return cases


def _reduction(name: str) -> Labeled:
    fn = name.split(".")[-1]
    cases: Labeled = []
    for dtype in NUMERIC:
        cases.append(_case(dtype, lambda d=dtype: ((_a(d),), {})))
    axes: list[Any] = [0, -1, (0, 1)] if fn not in ("argmax", "argmin", "cumsum") else [0, -1]
    for axis in axes:
        cases.append(_case(f"axis {axis}", lambda axis=axis: ((_a("float64"),), {"axis": axis})))
        if fn != "cumsum":
            cases.append(
                _case(
                    f"axis {axis} keepdims",
                    lambda axis=axis: ((_a("int16"),), {"axis": axis, "keepdims": True}),
                )
            )
    cases += [
        _case("empty", lambda: ((_a("float32", (0,)),), {})),
        _case("empty 2-d axis 1", lambda: ((_a("float32", (0, 3)),), {"axis": 1})),
        _case("empty bool", lambda: ((np.zeros((0,), bool),), {})),
        _case("0-d", lambda: ((_a("float64", ()),), {})),
        _case("nan", lambda: ((_a("float64", special=True),), {})),
        _case("F layout", lambda: ((_a("float32", layout="F"),), {"axis": 0})),
        _case("list", lambda: (([[1, 2], [3, 4]],), {})),
        _case("python float", lambda: ((2.5,), {})),
        _case("bad axis", lambda: ((_a(),), {"axis": 5})),
        _case("3-d", lambda: ((_a("float32", (2, 3, 4)),), {"axis": (0, 2)})),
    ]
    if fn in ("sum", "prod", "mean", "cumsum"):
        cases.append(_case("dtype", lambda: ((_a("uint8"),), {"dtype": np.int32})))
    if fn in ("var", "std"):
        cases.append(_case("ddof 1", lambda: ((_a("float64"),), {"ddof": 1})))
        cases.append(_case("ddof 99", lambda: ((_a("float64"),), {"ddof": 99})))
    if fn in ("sum", "prod", "max", "min", "amax", "amin"):
        cases.append(_case("initial", lambda: ((_a(),), {"initial": 1.0})))
    return cases


def _stats(name: str) -> Labeled:
    fn = name.split(".")[-1]
    base: Labeled = [_case(d, lambda d=d: ((_a(d),), {})) for d in NUMERIC]
    if fn in ("percentile", "quantile"):
        q = 50 if fn == "percentile" else 0.5
        base = [_case(d, lambda d=d: ((_a(d), q), {})) for d in NUMERIC]
        base += [
            _case("q list", lambda: ((_a("float64"), [q / 2, q]), {})),
            _case("q out of range", lambda: ((_a(), 200.0), {})),
            _case("axis", lambda: ((_a("float64"), q), {"axis": 1})),
            _case("keepdims", lambda: ((_a("float64"), q), {"axis": 0, "keepdims": True})),
            _case("nan", lambda: ((_a("float64", special=True), q), {})),
            _case("empty", lambda: ((_a("float64", (0,)), q), {})),
            _case("method", lambda: ((_a("float64"), q), {"method": "nearest"})),
        ]
    elif fn == "norm":
        base += [
            _case(f"ord {o!r}", lambda o=o: ((_a("float64", (5,)),), {"ord": o}))
            for o in (1, 2, np.inf, -np.inf, 0, 3)
        ]
        base += [
            _case("axis 1", lambda: ((_a("float64"),), {"axis": 1})),
            _case("fro", lambda: ((_a("float64"),), {"ord": "fro"})),
            _case("matrix 2-norm", lambda: ((_a("float64"),), {"ord": 2})),
            _case("empty", lambda: ((_a("float64", (0,)),), {})),
        ]
    elif fn in ("sort", "argsort"):
        base += [
            _case("axis 0", lambda: ((_a("float64"),), {"axis": 0})),
            _case("axis None", lambda: ((_a("float64"),), {"axis": None})),
            _case("stable", lambda: ((_a("int8"),), {"kind": "stable"})),
            _case("nan", lambda: ((_a("float64", special=True),), {})),
            _case("empty", lambda: ((_a("float64", (0,)),), {})),
        ]
    else:  # median
        base += [
            _case("axis", lambda: ((_a("float64"),), {"axis": 1})),
            _case("even", lambda: ((_a("float64", (4,)),), {})),
            _case("nan", lambda: ((_a("float64", special=True),), {})),
            _case("empty", lambda: ((_a("float64", (0,)),), {})),
            _case("keepdims", lambda: ((_a("float64"),), {"axis": 0, "keepdims": True})),
        ]
    base.append(
        _case(
            "0-d",
            lambda: (
                (_a("float64", ()),)
                + ((0.5,) if fn == "quantile" else (50,) if fn == "percentile" else ()),
                {},
            ),
        )
    )
    return base


def _joins(name: str) -> Labeled:
    fn = name.split(".")[-1]
    cases: Labeled = [_case(f"{d}", lambda d=d: (([_a(d), _a(d, seed=1)],), {})) for d in NUMERIC]
    cases += [
        _case("mixed", lambda: (([_a("uint8"), _a("float32", seed=1)],), {})),
        _case("three 1-d", lambda: (([_a(shape=(3,)), _a(shape=(3,)), _a(shape=(3,))],), {})),
        _case("0-d", lambda: (([_a(shape=()), _a(shape=())],), {})),
        _case("mismatch", lambda: (([_a(shape=(3, 4)), _a(shape=(2, 5))],), {})),
        _case("empty list", lambda: (([],), {})),
        _case("tuple", lambda: (((_a(), _a(seed=1)),), {})),
        _case("F layout", lambda: (([_a(layout="F"), _a(layout="reversed")],), {})),
    ]
    if fn in ("concatenate", "stack"):
        cases.append(_case("axis 1", lambda: (([_a(), _a(seed=1)],), {"axis": 1})))
        cases.append(_case("dtype", lambda: (([_a(), _a(seed=1)],), {"dtype": np.float64})))
    if fn == "concatenate":
        cases.append(_case("axis None", lambda: (([_a(), _a(seed=1)],), {"axis": None})))
    return cases


def _pad(name: str) -> Labeled:
    cases: Labeled = [_case(d, lambda d=d: ((_a(d), 1), {})) for d in NUMERIC]
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap", "mean", "linear_ramp"):
        cases.append(_case(mode, lambda mode=mode: ((_a(), ((1, 2), (3, 0))), {"mode": mode})))
    cases += [
        _case("wide reflect", lambda: ((_a(), 7), {"mode": "reflect"})),
        _case("constant values", lambda: ((_a("int16"), 2), {"constant_values": (5, -3)})),
        _case("float into int", lambda: ((_a("int16"), 2), {"constant_values": 2.7})),
        _case("negative", lambda: ((_a(), -1), {})),
        _case("empty axis edge", lambda: ((_a(shape=(0, 3)), 1), {"mode": "edge"})),
        _case("odd reflect", lambda: ((_a(), 1), {"mode": "reflect", "reflect_type": "odd"})),
        _case("0-d", lambda: ((_a(shape=()), 1), {})),
    ]
    return cases


def _products(name: str) -> Labeled:
    shapes = [((3, 4), (4, 2)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((3, 4), (4,)), ((), (3,))]
    cases: Labeled = [
        _case(f"{d}", lambda d=d: ((_a(d, (3, 4)), _a(d, (4, 2), seed=1)), {})) for d in NUMERIC
    ]
    cases += [
        _case(
            f"{sa} @ {sb}",
            lambda sa=sa, sb=sb: ((_a("float64", sa), _a("float64", sb, seed=1)), {}),
        )
        for sa, sb in shapes
    ]
    cases += [
        _case("mismatch", lambda: ((_a(shape=(3, 4)), _a(shape=(3, 4))), {})),
        _case("mixed", lambda: ((_a("int32", (3, 4)), _a("float32", (4, 2))), {})),
        _case("empty", lambda: ((_a(shape=(0, 4)), _a(shape=(4, 2))), {})),
        _case("F", lambda: ((_a(layout="F"), _a(shape=(4, 2), layout="reversed")), {})),
    ]
    return cases


def _image_255(shape: tuple[int, ...]) -> np.ndarray:
    return (np.random.default_rng(7).random(shape) * 255).astype(np.float32)


def _fft(name: str) -> Labeled:
    fn = name.split(".")[-1]
    shape = (4, 8)
    cases: Labeled = [_case(d, lambda d=d: ((_a(d, shape),), {})) for d in NUMERIC]
    cases += [
        _case("1-d", lambda: ((_a("float64", (8,)),), {})),
        _case("odd", lambda: ((_a("float32", (5, 7)),), {})),
        _case("empty", lambda: ((_a("float64", (0,)),), {})),
        _case("F", lambda: ((_a("float32", shape, layout="F"),), {})),
        _case("nan", lambda: ((_a("float64", shape, special=True),), {})),
        # an image's scale: errors follow the largest magnitude (the sum), not each element's
        _case("float32 image 0-255", lambda: ((_image_255((100, 100, 3)),), {})),
        _case("float32 256x256 0-255", lambda: ((_image_255((256, 256)),), {})),
    ]
    if fn in ("fft", "ifft", "rfft", "irfft"):
        cases += [
            _case("n", lambda: ((_a("float64", shape),), {"n": 6})),
            _case("axis 0", lambda: ((_a("float64", shape),), {"axis": 0})),
            _case("ortho", lambda: ((_a("float64", shape),), {"norm": "ortho"})),
            _case("forward", lambda: ((_a("complex64", shape),), {"norm": "forward"})),
        ]
    elif fn in ("fftshift", "ifftshift"):
        cases += [_case("axes", lambda: ((_a("float64", shape),), {"axes": 0}))]
    else:
        cases += [
            _case("s", lambda: ((_a("float64", shape),), {"s": (3, 6)})),
            _case("axes", lambda: ((_a("float64", (2, 4, 6)),), {"axes": (0, 2)})),
            _case("ortho", lambda: ((_a("float64", shape),), {"norm": "ortho"})),
        ]
    return cases


def _random(name: str) -> Labeled:
    fn = name.split(".")[-1]
    size_cases = [None, 5, (2, 3), (0,)]
    if fn in ("rand", "randn"):
        return [_case(f"{dims}", lambda dims=dims: (dims, {})) for dims in ((), (5,), (2, 3), (0,))]
    if fn in ("random", "random_sample"):
        return [_case(f"size {s}", lambda s=s: ((), {"size": s})) for s in size_cases]
    if fn == "uniform":
        cases = [_case(f"size {s}", lambda s=s: ((-1.0, 2.0), {"size": s})) for s in size_cases]
        return [*cases, _case("array bounds", lambda: ((_a("float64", (3,)), 20.0), {"size": 3}))]
    if fn == "normal":
        cases = [_case(f"size {s}", lambda s=s: ((1.0, 2.0), {"size": s})) for s in size_cases]
        return [*cases, _case("array loc", lambda: ((_a("float64", (3,)), 1.0), {"size": 3}))]
    if fn == "randint":
        cases = [_case(f"size {s}", lambda s=s: ((0, 10), {"size": s})) for s in size_cases]
        return [
            *cases,
            _case("uint8", lambda: ((0, 256), {"size": 4, "dtype": np.uint8})),
            _case("low only", lambda: ((5,), {"size": 3})),
            _case("empty range", lambda: ((5, 5), {"size": 3})),
            _case("too big for dtype", lambda: ((0, 300), {"size": 3, "dtype": np.uint8})),
        ]
    if fn in ("shuffle", "permutation"):
        cases = [_case(d, lambda d=d: ((_a(d, (6, 2)),), {})) for d in ("float32", "int64", "bool")]
        cases += [_case("1-d", lambda: ((_a("float64", (7,)),), {}))]
        if fn == "permutation":
            cases += [_case("int", lambda: ((5,), {}))]
        return cases
    # choice
    return [
        _case("1-d", lambda: ((_a("float64", (6,)),), {"size": 4})),
        _case("no replace", lambda: ((_a("float64", (6,)),), {"size": 4, "replace": False})),
        _case("p", lambda: ((_a("float64", (3,)),), {"size": 4, "p": [0.2, 0.3, 0.5]})),
        _case("int population", lambda: ((5,), {"size": 3})),
        _case("too many", lambda: ((_a("float64", (3,)),), {"size": 5, "replace": False})),
        _case("scalar draw", lambda: ((_a("float64", (3,)),), {})),
    ]


def _clip(name: str) -> Labeled:
    cases: Labeled = [_case(d, lambda d=d: ((_a(d), 0, 5), {})) for d in NUMERIC]
    cases += [
        _case("scalar first", lambda: ((2.5, 0.0, 1.0), {})),
        _case("int scalar first", lambda: ((7, 0, 5), {})),
        _case("array bounds", lambda: ((_a(), _a(seed=1), _a(seed=2) + 5), {})),
        _case("lo > hi", lambda: ((_a(), 5, 1), {})),
        _case("None lo", lambda: ((_a(), None, 1), {})),
        _case("both None", lambda: ((_a(), None, None), {})),
        _case("nan", lambda: ((_a("float64", special=True), -1.0, 1.0), {})),
        _case("uint8 -1..300", lambda: ((_a("uint8"), -1, 300), {})),
        _case("min= max=", lambda: ((_a(),), {"min": 0, "max": 1})),
        _case("F", lambda: ((_a(layout="F"), 0, 1), {})),
        _case("list", lambda: (([1, 5, 9], 2, 6), {})),
    ]
    return cases


def _where(name: str) -> Labeled:
    return [
        _case("three", lambda: ((_a("bool"), _a(), _a(seed=1)), {})),
        _case("mixed", lambda: ((_a("bool"), _a("uint8"), 2.5), {})),
        _case("scalars", lambda: ((_a("bool"), 1, 0), {})),
        _case("one", lambda: ((_a("int16"),), {})),
        _case("one 0-d", lambda: ((np.array(3),), {})),
        _case("int condition", lambda: ((_a("int32"), _a(), _a(seed=1)), {})),
        _case("two", lambda: ((_a("bool"), _a()), {})),
        _case("scalar condition", lambda: ((True, _a(), _a(seed=1)), {})),
        _case("broadcast", lambda: ((_a("bool", (4,)), _a(), 0.0), {})),
    ]


def _round(name: str) -> Labeled:
    cases: Labeled = [_case(d, lambda d=d: ((_a(d),), {})) for d in NUMERIC]
    cases += [
        _case("decimals 2", lambda: ((_a("float64"),), {"decimals": 2})),
        _case("decimals -1", lambda: ((_a("float64") * 100,), {"decimals": -1})),
        _case("int decimals -1", lambda: ((_a("int32"),), {"decimals": -1})),
        _case("python float", lambda: ((2.5,), {})),
        _case("python int", lambda: ((7,), {})),
        _case("numpy scalar", lambda: ((np.float32(2.5),), {})),
        _case("halves", lambda: ((np.array([0.5, 1.5, 2.5, -0.5]),), {})),
        _case("nan", lambda: ((_a("float64", special=True),), {})),
        _case("0-d", lambda: ((_a("float64", ()),), {})),
    ]
    return cases


def _tile(name: str) -> Labeled:
    fn = name.split(".")[-1]
    reps: list[Any] = [2, (2, 1), (1, 2, 3), 0] if fn == "tile" else [2, 0, 3]
    cases: Labeled = [_case(d, lambda d=d: ((_a(d), 2), {})) for d in NUMERIC]
    cases += [_case(f"reps {r!r}", lambda r=r: ((_a(), r), {})) for r in reps]
    if fn == "repeat":
        cases += [
            _case("axis", lambda: ((_a(), 2), {"axis": 1})),
            _case("array repeats", lambda: ((_a(shape=(3,)), [1, 2, 3]), {})),
            _case("negative", lambda: ((_a(), -1), {})),
        ]
    cases.append(_case("0-d", lambda: ((_a(shape=()), 3), {})))
    return cases


_ELEMENTWISE_UNARY = [f"numpy.{n}" for n in (*elementwise.UNARY, *elementwise.PREDICATE)]
_ELEMENTWISE_BINARY = [f"numpy.{n}" for n in (*elementwise.ARITH, *elementwise.COMPARE)]
_CORPUS: dict[str, Callable[[str], Labeled]] = {
    **dict.fromkeys(_ELEMENTWISE_UNARY, _unary),
    **dict.fromkeys(_ELEMENTWISE_BINARY, _binary),
    **{
        f"numpy.{n}": _reduction
        for n in [
            "sum",
            "prod",
            "mean",
            "var",
            "std",
            "min",
            "max",
            "amin",
            "amax",
            "argmax",
            "argmin",
            "all",
            "any",
            "cumsum",
        ]
    },
    **{f"numpy.{n}": _stats for n in ("median", "percentile", "quantile", "sort", "argsort")},
    "numpy.linalg.norm": _stats,
    **{f"numpy.{n}": _joins for n in ("concatenate", "stack", "hstack", "vstack")},
    "numpy.pad": _pad,
    "numpy.dot": _products,
    "numpy.matmul": _products,
    **{
        f"numpy.fft.{n}": _fft
        for n in [
            "fft",
            "ifft",
            "rfft",
            "irfft",
            "fft2",
            "ifft2",
            "rfft2",
            "fftn",
            "ifftn",
            "fftshift",
            "ifftshift",
        ]
    },
    **{
        f"numpy.random.{n}": _random
        for n in [
            "rand",
            "randn",
            "random",
            "random_sample",
            "uniform",
            "normal",
            "randint",
            "shuffle",
            "permutation",
            "choice",
        ]
    },
    "numpy.clip": _clip,
    "numpy.where": _where,
    "numpy.round": _round,
    "numpy.around": _round,
    "numpy.tile": _tile,
    "numpy.repeat": _tile,
}


def cases(name: str) -> Labeled:
    """The fixed corpus of a NumPy function (canonical name)."""
    return _CORPUS[name](name)


def explore(name: str) -> st.SearchStrategy[tuple[str, Callable[[], Args]]]:
    """Random draws from the corpus's cases with random dtypes swapped in where they fit."""
    fixed = cases(name)
    return st.sampled_from(fixed)


NAMES = frozenset(_CORPUS)
