"""Replaying a traced sample chain, per sample with the libraries or as one batched run.

A chain found in the trace (:mod:`codedag.optimize.chains`) is a list of steps with their recorded
argument descriptions. :func:`prepare` rebuilds each sample's arguments once (the entry's data
array synthesized from its description, matrices and LUTs replayed exactly), keeping the chain's
running value as a slot. Then:

* :func:`run_original` runs each sample through the original functions, then
  ``default_collate``: what the training loop gets today;
* :func:`run_batched` runs each sample with deferral on (its entry call starts a deferred value,
  the later steps record on it, exactly as inside a patched ``__getitem__``), collates the deferred
  samples into one batch record and runs it through the batched executor on the device:
  what batched execution does, without patching anything.

Steps recorded without arguments are replayed where the trace says enough (``astype`` to the
result's dtype, ``transpose`` to the result's shape, conversions to torch). Arithmetic operators
recorded without their operands (a statement of several operations, such as
``(img.astype(np.float32) / 255.0 - mean) / std``, is one step of the trace) are replayed with a
stand-in: the same operator once with an array of ones of each operand's traced shape and dtype
that the chain did not make (``mean`` and ``std`` of 3 elements in ``(x - mean) / std``: one
operation per operand, shared by every sample as a constant is), or with the scalar 1 of the
result's kind where it read none, and an ``astype`` whose result was not observed converts to the
dtype of the step it feeds. A stand-in costs what those operations of that kind, shape and dtype
cost, on both sides of the comparison (NumPy broadcasting a 3-element operand over an image
costs about ten times a scalar's, so the operand's shape matters); its result is checked
against the traced shape and dtype, and the replay stops where they differ.
:attr:`Prepared.stand_ins` names them. The replay stops at the first step it cannot repeat, and
:attr:`Prepared.timed_steps` says how far it got.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NO_ARG_METHODS = ("float", "double", "half", "int", "long", "byte", "contiguous", "clone")
STAND_IN_OPERATORS = frozenset(
    f"operator.{name}"
    for name in ("add", "sub", "mul", "truediv", "iadd", "isub", "imul", "itruediv")
)
"""Operators replayed with a stand-in operand when the trace kept none (see the module doc)."""


@dataclass
class _Step:
    name: str
    function: Callable[..., Any]
    batched_function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    slot: str  # where the running value goes: "0", "1", ..., a keyword, or "self"
    stand_in: bool = False  # operands not from the trace (see the module doc)

    def call(self, value: Any, batched: bool) -> Any:
        fn = self.batched_function if batched else self.function
        if self.slot == "self":
            return fn(value, *self.args, **self.kwargs)
        if self.slot.isdigit():
            args = list(self.args)
            args[int(self.slot)] = value
            return fn(*args, **self.kwargs)
        return fn(*self.args, **{**self.kwargs, self.slot: value})


@dataclass
class PreparedSample:
    """One sample's chain, ready to run: its entry data and its steps."""

    data: Any
    steps: list[_Step]


@dataclass
class Prepared:
    """A batch of prepared samples.

    Attributes:
        samples: one per sample of the batch (traced samples repeated up to the batch size).
        timed_steps: operation names the replay covers (of the first sample).
        untimed_steps: operation names it could not repeat (recorded without enough detail).
        stand_ins: timed steps replayed with stand-in operands (of the first sample).
    """

    samples: list[PreparedSample]
    timed_steps: list[str] = field(default_factory=list)
    untimed_steps: list[str] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)


def _function(name: str) -> Callable[..., Any]:
    """The original function of a step name."""
    module, _, short = name.rpartition(".")
    if module == "operator":
        return getattr(operator, short)
    if module == "numpy.ndarray":
        if short == "T":
            return lambda a: a.T
        return lambda a, *args, **kwargs: getattr(a, short)(*args, **kwargs)
    if module == "torch.Tensor":
        return lambda a, *args, **kwargs: getattr(a, short)(*args, **kwargs)
    if module == "numpy" and hasattr(np, short) and isinstance(getattr(np, short), np.ufunc):
        return getattr(np, short)
    from codedag.backends.probe import original_function
    from codedag.patching import original_of

    return original_of(original_function(name))


def _batched_function(name: str, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """What a patched process calls for this step: the recording wrappers where there are some."""
    from codedag.backends.batched.wrappers import CONVERSIONS, chain_function, conversion

    if name in CONVERSIONS:
        return conversion(name, original)
    if kind == "library":
        return chain_function(name, original, None)
    return original  # operators, ufuncs, views and methods dispatch on the deferred value


def _permutation(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...] | None:
    for perm in itertools.permutations(range(len(before))):
        if tuple(before[p] for p in perm) == tuple(after):
            return perm
    return None


def _without_data(args: list[dict[str, Any]], slot: str) -> list[dict[str, Any]]:
    return [
        {"name": slot, "kind": "scalar", "value": None} if str(e.get("name")) == slot else e
        for e in args
    ]


def _numpy_dtype(text: str | None) -> np.dtype | None:
    """The NumPy dtype a traced dtype names (``float32``, ``torch.float32``), or None."""
    if text is None:
        return None
    try:
        return np.dtype(text.removeprefix("torch."))
    except TypeError:  # bfloat16, complex32, ...: no NumPy dtype
        return None


@functools.lru_cache(maxsize=64)
def _ones(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A read-only array of ones, one object per shape and dtype (a constant every sample
    shares, as the user's ``mean`` is)."""
    out = np.ones(shape, dtype=np.dtype(dtype))
    out.flags.writeable = False
    return out


def _each_operand(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` applied with each operand in turn: ``f(f(value, a), b)``."""

    def apply(value: Any, *operands: Any) -> Any:
        for operand in operands:
            value = function(value, operand)
        return value

    return apply


def _stand_in(step: Any, feeds: Any) -> _Step | None:
    """An operator or ``astype`` the trace kept no operands of, with stand-in operands."""
    name = step.name
    if name in STAND_IN_OPERATORS:
        result = _numpy_dtype(step.out_dtype)
        if result is None:
            return None
        try:
            operands: list[Any] = [_ones(shape, dtype) for shape, dtype in step.operands]
        except (TypeError, ValueError):  # a dtype NumPy does not know: a scalar instead
            operands = []
        if not operands:
            operands = [1.0 if result.kind in "fc" else 1]
        function = _each_operand(_function(name))
        return _Step(name, function, function, (None, *operands), {}, "0", stand_in=True)
    fed = _numpy_dtype(getattr(feeds, "out_dtype", None))
    if name == "numpy.ndarray.astype" and fed is not None:
        function = _function(name)
        return _Step(name, function, function, (fed,), {}, "self", stand_in=True)
    return None


def _matches_trace(step: Any, value: Any) -> bool:
    """Whether a replayed result has the traced step's shape and dtype (where traced)."""
    if step.out_shape is not None and tuple(getattr(value, "shape", ())) != tuple(step.out_shape):
        return False
    dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
    return step.out_dtype is None or dtype == step.out_dtype.removeprefix("torch.")


def _as_positional(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], slot: str
) -> tuple[tuple[Any, ...], dict[str, Any], str]:
    """A Python function's call as user code writes it: the leading parameters the trace named
    (it records Python calls by parameter) passed by position, the data slot among them. NumPy
    dispatches ``np.transpose(a=x)`` to a deferred value that expects its array first."""
    if args or slot not in kwargs:
        return args, kwargs, slot
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs, slot
    positional: list[Any] = []
    rest = dict(kwargs)
    for parameter in parameters:
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            break
        if parameter.name not in rest:
            break
        positional.append(rest.pop(parameter.name))
    names = [p.name for p in parameters[: len(positional)]]
    if slot not in names:
        return args, kwargs, slot
    return tuple(positional), rest, str(names.index(slot))


def _step(step: Any, before: tuple[int, ...] | None, seed: int, feeds: Any = None) -> _Step | None:
    """A replayable step, or ``None`` when the trace does not say enough to repeat it
    (``feeds``: the traced step after it)."""
    from codedag.calibrate.inputs import rebuild_call

    name = step.name
    short = name.rpartition(".")[2]
    if step.args is not None and step.data_slot is not None:
        try:
            args, kwargs = rebuild_call(_without_data(step.args, step.data_slot), seed)
        except Exception:
            return None
        function = _function(name)
        args, kwargs, slot = _as_positional(function, args, kwargs, step.data_slot)
        return _Step(
            name,
            function,
            _batched_function(name, step.kind, function),
            args,
            kwargs,
            slot,
        )
    extra: tuple[Any, ...] = ()
    if name == "numpy.ndarray.astype":
        if step.out_dtype is None:
            return _stand_in(step, feeds)
        extra = (np.dtype(step.out_dtype),)
    elif name in ("numpy.ndarray.transpose", "numpy.ndarray.reshape"):
        if step.out_shape is None or before is None:
            return None
        if short == "reshape":
            extra = (tuple(step.out_shape),)
        else:
            perm = _permutation(before, tuple(step.out_shape))
            if perm is None:
                return None
            extra = (perm,)
    elif name in ("numpy.ndarray.copy", "numpy.ndarray.T"):
        pass
    elif name in ("torch.from_numpy", "torch.as_tensor", "torch.tensor"):
        function = _function(name)
        batched = _batched_function(name, step.kind, function)
        return _Step(name, function, batched, (None,), {}, "0")
    elif name.startswith("torch.Tensor.") and short in NO_ARG_METHODS:
        pass
    else:
        return _stand_in(step, feeds)
    function = _function(name)
    return _Step(name, function, function, extra, {}, "self")


def prepare(samples: list[Any], batch_size: int, seed: int = 0) -> Prepared:
    """Rebuild the arguments of ``batch_size`` samples (the traced ones, cycled).

    Args:
        samples: the traced samples' chains (:class:`codedag.optimize.chains.SampleChain`).
        batch_size: samples per batch.
        seed: seed of the synthesized arrays.

    Raises:
        ValueError: the entry call cannot be rebuilt (nothing to time).
    """
    from codedag.calibrate.inputs import rebuild_call

    out = Prepared([])
    chains: list[Any] = []
    for i in range(batch_size):
        chain = samples[i % len(samples)]
        entry = chain.steps[0]
        if entry.args is None or entry.data_slot is None:
            raise ValueError(f"{entry.name}: the trace recorded no arguments for the entry call")
        try:
            args, kwargs = rebuild_call(entry.args, seed + i)
        except Exception as e:
            raise ValueError(f"{entry.name}: cannot rebuild the arguments: {e}") from e
        slot = entry.data_slot
        data = args[int(slot)] if slot.isdigit() else kwargs[slot]
        function = _function(entry.name)
        steps = [
            _Step(
                entry.name,
                function,
                function,
                args,
                kwargs,
                slot,
            )
        ]
        before = entry.out_shape
        rest = chain.steps[1:]
        for k, traced in enumerate(rest):
            feeds = rest[k + 1] if k + 1 < len(rest) else None
            step = _step(traced, before, seed + i, feeds)
            if step is None:
                break
            steps.append(step)
            before = traced.out_shape
        if any(s.stand_in for s in steps):
            if i >= len(samples):  # a traced sample again: its depth was checked once
                del steps[len(out.samples[i % len(samples)].steps) :]
            else:
                del steps[_checked_depth(data, steps, chain.steps) :]
        out.samples.append(PreparedSample(data, steps))
        chains.append(chain)
    # Every sample leaves out as many of its last steps as the least replayed one (outputs must
    # stack; samples may take different steps in the middle, such as a random flip).
    dropped = max(len(c.steps) - len(p.steps) for c, p in zip(chains, out.samples))
    for chain, sample in zip(chains, out.samples):
        del sample.steps[max(1, len(chain.steps) - dropped) :]
    first = out.samples[0].steps
    out.timed_steps = [s.name for s in first]
    out.untimed_steps = [s.name for s in samples[0].steps[len(first) :]]
    out.stand_ins = [s.name for s in first if s.stand_in]
    return out


def _checked_depth(data: Any, steps: list[_Step], traced: list[Any]) -> int:
    """How many of ``steps`` to keep, run once through the original functions: up to the first
    step, from the first stand-in on, whose result is not what the trace saw (or that raises)."""
    value = data
    checking = False
    for depth, (step, seen) in enumerate(zip(steps, traced)):
        checking = checking or step.stand_in
        try:
            value = step.call(value, batched=False)
        except Exception:
            return depth
        if checking and not _matches_trace(seen, value):
            return depth
    return len(steps)


class ShapesDiffer(ValueError):
    """The replayed samples' values differ in shape: no batch holds them."""


def run_original(prepared: Prepared) -> Any:
    """Each sample through the original functions, then ``default_collate``.

    Raises:
        ShapesDiffer: the samples' values differ in shape.
    """
    from torch.utils.data import default_collate

    outputs = []
    for sample in prepared.samples:
        value = sample.data
        for step in sample.steps:
            value = step.call(value, batched=False)
        outputs.append(_collatable(value))
    shapes = list(dict.fromkeys(tuple(getattr(v, "shape", ())) for v in outputs))
    if len(shapes) > 1:  # images kept at their own sizes, a flip on some samples' path only
        raise ShapesDiffer(
            "its replayed samples' values differ in shape "
            f"({', '.join(str(list(shape)) for shape in shapes[:2])}): one batch cannot hold them"
        )
    return default_collate(outputs)


def _collatable(value: Any) -> Any:
    """A replayed sample's last value as ``default_collate`` takes it: a view with negative
    strides (a flip, where the replay stops before the copy the sample's next step makes)
    copied, since torch takes no such array."""
    if isinstance(value, np.ndarray) and any(stride < 0 for stride in value.strides):
        return np.ascontiguousarray(value)
    return value


def record(prepared: Prepared) -> Any:
    """Each sample with deferral, collated into one batch record (what a worker produces).

    Raises:
        ValueError: the samples could not be recorded as one batch (the record would force).
    """
    import codedag.backends.batched.deferred as deferred
    import codedag.backends.batched.ops as ops
    from codedag.backends.batched.collate import BatchRecord, default_collate_deferred

    outputs = []
    with deferred.deferring():
        for sample in prepared.samples:
            entry = sample.steps[0]
            op = ops.library_op(entry.name)
            if op is None:
                raise ValueError(f"{entry.name} has no batch-first backend")
            args = list(entry.args)
            kwargs = dict(entry.kwargs)
            value = deferred.start(op, sample.data, tuple(args), kwargs, f"{entry.name} replay")
            for step in sample.steps[1:]:
                value = step.call(value, batched=True)
            outputs.append(value)
        batch = default_collate_deferred(outputs)
    if not isinstance(batch, BatchRecord):
        raise ValueError("the samples were forced when collated (their shapes differ)")
    return batch


@dataclass
class BatchedRun:
    """One batched run: the batch on the host, and what it took."""

    output: Any
    backend_calls: int
    groups: int
    h2d_bytes: int
    d2h_bytes: int
    mismatches: list[str]


def to_device(value: Any, device: str) -> Any:
    """A collated batch's tensors copied to ``device`` (what a training loop's ``.to(device)``
    does with the batch it receives)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(to_device(v, device) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def run_batched(
    prepared: Prepared,
    device: str,
    verify: bool = False,
    count_transfers: bool = False,
    on_device: bool = False,
) -> BatchedRun:
    """The batch through batched execution on ``device``, delivered on the host (or left on the
    device with ``on_device``).

    Args:
        prepared: the samples.
        device: where the executor runs.
        verify: also run every round through the original functions and compare (tolerance
            table); differences are returned in ``mismatches``.
        count_transfers: on the CPU, copy as a device would, to count host<->device bytes.
        on_device: deliver the batch where it ran, with no copy back (what batched execution
            does once the training loop moves its batches to that device).
    """
    import torch

    from codedag.backends.batched.executor import BatchExecutor
    from codedag.backends.batched.transfer import DeviceIO

    batch = record(prepared)
    io = DeviceIO(torch.device(device), simulate=count_transfers)
    outcome = BatchExecutor(torch.device(device), io).run(batch, verify=verify)
    output = outcome.tensor if on_device else io.download(outcome.tensor)
    if output.device.type != "cpu" and not on_device:  # pragma: no cover - not moved by DeviceIO
        output = output.cpu()
    if outcome.failed:
        raise ValueError(f"the batched run failed for {len(outcome.failed)} sample(s)")
    return BatchedRun(
        output,
        outcome.backend_calls,
        outcome.groups,
        io.h2d_bytes,
        io.d2h_bytes,
        list(outcome.mismatches),
    )
