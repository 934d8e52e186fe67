"""The exact-table rule against NumPy: every chain it admits gathers bit for bit what NumPy
computes on a large array holding all 256 byte values in shuffled order, contiguous, strided and
with per-channel constants; what it refuses is inexact here or undefined behaviour."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from codedag.backends import exact_tables

N = 1_000_003
"""Elements of the large array: not a multiple of any SIMD width, so its loop has a tail."""
DTYPES = [np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
_ALL = [*DTYPES, np.int8, np.uint16, np.uint32, np.uint64, np.bool_]
Chain = list[tuple[str, Callable[[Any], Any]]]


def _bytes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    values = rng.permutation(np.resize(np.arange(256, dtype=np.uint8), N))
    last_zero = np.flatnonzero(values == 0)[-1]
    values[[last_zero, -1]] = values[[-1, last_zero]]  # a 0 (-0.0, log's -inf) in the tail
    spaced = np.zeros(2 * N, np.uint8)
    spaced[::2] = values
    return values, spaced[::2], values[: (N // 3) * 3].reshape(-1, 3)


CONTIGUOUS, STRIDED, PIXELS = _bytes()


def _chains(dtype: Any) -> dict[str, Chain]:
    d = np.dtype(dtype)
    cast: Chain = [("numpy.ndarray.astype", lambda x: x.astype(d))]
    f = d.type if d.kind == "f" else float
    negated = [*cast, ("operator.mul", lambda x: x * -1.0)]  # 0 gives -0.0 on floats
    chains: dict[str, Chain] = {
        "clip": [*cast, ("numpy.clip", lambda x: np.clip(x, 10, 200))],
        "clip float": [*cast, ("numpy.clip", lambda x: np.clip(x, 10.5, 200.5))],
        "clip -0.0": [*negated, ("numpy.clip", lambda x: np.clip(x, -0.0, 5.0))],
        "clip nan": [*cast, ("numpy.clip", lambda x: np.clip(x, 0.0, np.nan))],
        "power": [*cast, ("numpy.power", lambda x: np.power(x, 2.2))],
        "** 2": [*cast, ("operator.pow", lambda x: x**2)],
        "** 0.5": [*cast, ("operator.truediv", lambda x: x / 255.0), ("operator.pow", lambda x: x**0.5)],
        "gamma": [*cast, ("operator.truediv", lambda x: x / f(255)), ("numpy.power", lambda x: np.power(x, f(1 / 2.2)))],
        "exp": [*cast, ("numpy.exp", np.exp)],
        "exp scaled": [*cast, ("operator.truediv", lambda x: x / f(-16)), ("numpy.exp", np.exp)],
        "log": [*cast, ("numpy.log", np.log)],
        "log1p": [*cast, ("numpy.log1p", np.log1p)],
        "sqrt": [*cast, ("numpy.sqrt", np.sqrt)],
        "divide": [*cast, ("operator.truediv", lambda x: x / 255.0)],
        "divide by zero": [*cast, ("operator.truediv", lambda x: x / 0.0)],
        "multiply": [*cast, ("operator.mul", lambda x: x * 1.7)],
        "add": [*cast, ("operator.add", lambda x: x + np.float32(0.5))],
        "subtract": [*cast, ("operator.sub", lambda x: x - 127.5)],
        "normalize": [*cast, ("operator.truediv", lambda x: x / 255.0), ("operator.sub", lambda x: x - 0.485)],
    }  # fmt: skip
    for name, function in (("minimum", np.minimum), ("maximum", np.maximum), ("fmin", np.fmin)):
        for constant in (0.0, -0.0, np.nan):
            call = (f"numpy.{name}", lambda x, fn=function, c=constant: fn(x, c))
            chains[f"{name}(-x, {constant})"] = [*negated, call]
    for target in _ALL:
        t = np.dtype(target)
        chains[f"astype {t}"] = [*cast, ("numpy.ndarray.astype", lambda x, t=t: x.astype(t))]
        if d.kind == "f" and t.kind in "iu":
            out_of_range = (
                ("operator.sub", lambda x: x - f(128)),
                ("numpy.ndarray.astype", lambda x, t=t: x.astype(t)),
            )
            chains[f"-128 astype {t}"] = [*cast, *out_of_range]
            chains[f"log astype {t}"] = [*cast, ("numpy.log", np.log), out_of_range[1]]
    return chains


def _channel_chains(dtype: Any) -> dict[str, Chain]:
    d = np.dtype(dtype)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    cast: Chain = [("numpy.ndarray.astype", lambda x: x.astype(d))]
    return {
        "normalize": [*cast, ("operator.truediv", lambda x: x / 255), ("operator.sub", lambda x: x - mean), ("operator.truediv", lambda x: x / std)],
        "gamma": [*cast, ("operator.truediv", lambda x: x / 255), ("numpy.power", lambda x: np.power(x, std))],
        "exp": [*cast, ("operator.mul", lambda x: x * std), ("numpy.exp", np.exp)],
        "maximum": [*cast, ("operator.mul", lambda x: x * -1.0), ("numpy.maximum", lambda x: np.maximum(x, np.array([0.0, -0.0, np.nan])))],
        "clip": [*cast, ("operator.mul", lambda x: x * -1.0), ("numpy.clip", lambda x: np.clip(x, np.array([0.0, -0.0, -1.0]), 5.0))],
    }  # fmt: skip


def _run(chain: Chain, x: Any) -> Any:
    for _name, call in chain:
        x = call(x)
    return x


def _verdict(chain: Chain, probe: np.ndarray) -> str | None:
    """The rule's refusal of the chain on the probe, call by call (None: admitted)."""
    source: Any = probe
    for name, call in chain:
        assert name in exact_tables.NAMES
        result = call(source)
        reason = exact_tables.refusal(name, source, result)
        if reason is not None:
            return reason
        source = result
    return None


def _same(a: Any, b: Any) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _exact(chain: Chain, table: np.ndarray, pixels: bool) -> bool:
    if pixels:
        return _same(table[PIXELS, np.arange(3)], _run(chain, PIXELS))
    return all(_same(table[x], _run(chain, x)) for x in (CONTIGUOUS, STRIDED))


def _settle(chain: Chain, pixels: bool = False) -> tuple[bool, str | None]:
    probe = np.arange(256, dtype=np.uint8).reshape((256, 1) if pixels else (256,))
    with np.errstate(all="ignore"):
        try:
            table = _run(chain, probe)
        except (OverflowError, TypeError, ValueError):
            return True, "raises"  # NumPy raises on the probe as it would on the array
        return _exact(chain, table, pixels), _verdict(chain, probe)


def _check(exact: bool, reason: str | None, label: str) -> None:
    if reason is None:
        assert exact, f"{label}: admitted but not bit-exact"
    elif exact:  # refused although exact here: only undefined casts and disagreeing loops
        assert "out of range" in reason or "loops" in reason or reason == "raises", label


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_admitted_chain_is_bit_exact_against_numpy(dtype: Any) -> None:
    for label, chain in _chains(dtype).items():
        _check(*_settle(chain), label)
    for label, chain in _channel_chains(dtype).items():
        _check(*_settle(chain, pixels=True), f"per channel {label}")


def test_the_rule_admits_what_is_exact_here_and_refuses_undefined_casts() -> None:
    probe = np.arange(256, dtype=np.uint8)
    floats = probe.astype(np.float32)
    with np.errstate(all="ignore"):
        logs = np.log(floats)
        assert exact_tables.refusal("numpy.ndarray.astype", logs, logs.astype(np.uint32))
        assert exact_tables.refusal(
            "numpy.ndarray.astype", floats - 128, (floats - 128).astype(np.uint8)
        )
        assert exact_tables.refusal("numpy.ndarray.astype", floats, floats.astype(np.uint8)) is None
        assert exact_tables.refusal("numpy.sqrt", floats, np.sqrt(floats)) is None
        assert exact_tables.refusal("numpy.matmul", floats, floats) is not None
    for name in ("minimum", "maximum", "clip", "exp", "log", "power", "fmin"):
        for dtype in (np.float16, np.float32, np.float64):
            verdict = exact_tables.refusal(f"numpy.{name}", floats, np.zeros(1, dtype))
            assert (verdict is None) == exact_tables.loops_agree(name, np.dtype(dtype))
        assert exact_tables.refusal(f"numpy.{name}", probe, probe) is None  # integers: exact


def test_the_self_check_finds_loops_that_differ_on_signed_zeros() -> None:
    """fmin and fmax give ``fmin(-0.0, 0.0)`` one zero in NumPy's SIMD blocks and the other in
    a short array's scalar loop on x86 with AVX: the check must see the difference."""
    negative = np.full(64, -0.0)
    short = [np.signbit(np.fmin(negative[:n], 0.0)) for n in range(1, 17)]
    differ = len({bool(s[0]) for s in short}) > 1
    if not differ:
        pytest.skip("fmin's loops agree on signed zeros on this CPU")
    assert not exact_tables.loops_agree("fmin", np.dtype(np.float64))


def test_log_of_zero_is_minus_infinity_in_the_table_and_warns_in_numpy() -> None:
    probe = np.arange(256, dtype=np.uint8).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            np.log(probe)  # the table warns for the 0 the array may not hold
    with np.errstate(divide="ignore"):
        table = np.log(probe)
        direct = np.log(CONTIGUOUS.astype(np.float32))
    assert table[0] == -np.inf and _same(table[CONTIGUOUS], direct)
