"""The batched executor's view of the migration backends: one small interface over the registry.

Every library backend is batch-first: images ``(N, H, W[, C])``, signals ``(N, T)``. The batched
executor calls the very same backend functions as a per-call migration, with N samples that share
their static arguments. What it needs to know about an op:

* which parameters hold per-sample data (images, signals): they get the batch axis;
* which parameters the backend accepts with one value per sample (a warp matrix per image,
  ``[N, 2, 3]``): the op's declared ``per_sample`` quirks (:mod:`codedag.backends.contract`); a
  parameter not declared there must be equal across a group, so differing values split groups;
* the keyword arguments the migrated path injects or renames (the device of NumPy draws).

NumPy's elementwise functions (ufuncs, ``clip``) are not batch-first: they follow NumPy's
broadcasting, so a batch is one more leading axis (:mod:`.ops` aligns the operands).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

_DEVICE_MARK = "DEVICE"


@dataclass(frozen=True)
class Backend:
    """How one library function's torch backend is called on a batch.

    Attributes:
        name: canonical name (``cv2.resize``).
        function: the batch-first backend.
        positional: the library's positional parameter names.
        data: parameters holding per-sample data (get the batch axis).
        per_sample: parameters the backend accepts with one value per sample.
        inject: keyword arguments added to every call (``"DEVICE"``: the call's device).
        renames: library keyword -> backend keyword.
        value_maps: parameter -> {library value: backend value}.
        batch_first: whether data parameters take ``(N, ...)`` (False: NumPy broadcasting).
        refuse: why the op's declaration refuses a call of the library's own arguments (the
            adapter's domain and the op's check), or ``None``.
        squeeze_channel: an ``(H, W, 1)`` image is the one-channel ``(H, W)`` (cv2: its results
            have no channel axis), so data of that shape reach the backend as ``(N, H, W)``.
    """

    name: str
    function: Callable[..., Any]
    positional: tuple[str, ...]
    data: frozenset[str]
    per_sample: frozenset[str]
    inject: Mapping[str, Any]
    renames: Mapping[str, str]
    value_maps: Mapping[str, Mapping[Any, Any]]
    batch_first: bool
    refuse: Callable[[tuple[Any, ...], dict[str, Any]], str | None] | None = None
    squeeze_channel: bool = False

    def refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """Why the op's declaration refuses these library arguments (``None``: it accepts)."""
        return None if self.refuse is None else self.refuse(args, kwargs)

    def call(self, args: list[Any], kwargs: dict[str, Any], device: torch.device) -> Any:
        """Run the backend with the library's arguments (data already batched on ``device``)."""
        if self.value_maps:
            for index, value in enumerate(args):
                if index < len(self.positional) and self.positional[index] in self.value_maps:
                    args[index] = self.value_maps[self.positional[index]][value]
            for key in list(kwargs):
                if key in self.value_maps:
                    kwargs[key] = self.value_maps[key][kwargs[key]]
        if self.renames:
            kwargs = {self.renames.get(k, k): v for k, v in kwargs.items()}
        for key, value in self.inject.items():
            kwargs[key] = device if value == _DEVICE_MARK else value
        return self.function(*args, **kwargs)


_CACHE: dict[str, Backend | None] = {}
_LOCK = threading.Lock()


def backend_for(name: str) -> Backend | None:
    """The batched view of ``name``'s backend, or ``None`` when it has none."""
    with _LOCK:
        if name in _CACHE:
            return _CACHE[name]
    found = _build(name)
    with _LOCK:
        _CACHE[name] = found
    return found


def _build(name: str) -> Backend | None:
    from codedag.backends.registry import default_registry

    spec = default_registry().get(name)
    if spec is None or spec.backend is None:
        return None
    if getattr(spec, "strategy", None) is not None and spec.strategy.value == "FactoryOp":
        return None
    quirks = getattr(spec, "quirks", None)
    per_sample = frozenset(getattr(quirks, "per_sample", None) or ())
    positional = tuple(spec.positional_names)
    data, batch_first = _data_params(spec, positional)
    inject = {k: (_DEVICE_MARK if _is_device_mark(v) else v) for k, v in spec.inject_kwargs.items()}
    return Backend(
        name=name,
        function=spec.backend,
        positional=positional,
        data=data,
        per_sample=per_sample - data,
        inject=inject,
        renames=dict(spec.renames),
        value_maps={k: dict(v) for k, v in spec.value_maps.items()},
        batch_first=batch_first,
        refuse=_refusal_of(spec),
        squeeze_channel=bool(getattr(getattr(spec, "adapter", None), "squeeze_channel", False)),
    )


def _refusal_of(spec: object) -> Callable[[tuple[Any, ...], dict[str, Any]], str | None]:
    """The declared refusal of ``spec``: its adapter's domain, then its own check."""
    adapter_refuse = getattr(getattr(spec, "adapter", None), "refuse", None)
    check = getattr(getattr(spec, "quirks", None), "check", None)

    def refuse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        reason = None
        if adapter_refuse is not None:
            reason = adapter_refuse(spec, args, kwargs)
        if reason is None and check is not None:
            try:
                reason = check(*args, **kwargs)
            except TypeError as e:  # arguments the library's signature does not take
                reason = f"arguments do not match the signature: {e}"
        return reason

    return refuse


def _data_params(spec: object, positional: tuple[str, ...]) -> tuple[frozenset[str], bool]:
    """The data parameters of a spec, and whether its backend is batch-first."""
    batch = getattr(spec, "batch", None)
    if batch is not None:  # the registry's batch axis rule
        names = {positional[i] for i in batch.positions if i < len(positional)}
        names |= set(batch.params) & set(positional)
        return frozenset(names), True
    adapter = getattr(spec, "adapter", None)
    if adapter is not None and hasattr(adapter, "data_positions"):  # the backend contract
        positions = adapter.data_positions(spec)
        names = {n for _i, n in positions}
        return frozenset(names), getattr(adapter, "library", "numpy") != "numpy"
    return frozenset(), False


def _is_device_mark(value: object) -> bool:
    return repr(value) == _DEVICE_MARK


def clear_cache() -> None:
    """Forget every looked-up backend (tests that register their own)."""
    with _LOCK:
        _CACHE.clear()
