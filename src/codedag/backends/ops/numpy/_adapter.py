"""The NumPy adapter and the declaration helper of the NumPy ops.

NumPy backends take the arrays as they are (no batch axis: NumPy functions already work on whole
arrays) and follow NumPy's semantics on them; results come back as arrays keeping the backend's
strides, 0-d results as NumPy scalars. Draws without an array argument get the call's device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from codedag.backends.adapters import ArrayAdapter
from codedag.backends.contract import OpSpec, Strategy, declare, parameters

NUMPY = ArrayAdapter("numpy", default_order="K")


def op(name: str, backend: Callable[..., Any], **quirks: Any) -> OpSpec:
    """Declare a NumPy op: MoveOnly, or StandardOp when the backend takes the call's device."""
    takes_device = parameters(backend)[1]
    strategy = Strategy.STANDARD_OP if takes_device else Strategy.MOVE_ONLY
    quirks.setdefault("empty", True)
    return declare(name, backend, NUMPY, strategy=strategy, **quirks)


def ops_of(
    backends: Mapping[str, Callable[..., Any]], quirks: Mapping[str, Mapping[str, Any]]
) -> list[OpSpec]:
    """One declaration per backend; ``quirks`` by the function's last name component."""
    return [op(name, fn, **quirks.get(name.rsplit(".", 1)[1], {})) for name, fn in backends.items()]
