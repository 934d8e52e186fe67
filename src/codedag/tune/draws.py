"""What a DataLoader's samples draw random numbers from: probed by loading a few samples.

A loader setting may change the random draws a sample gets (another worker count, workers kept
across epochs: :meth:`LoaderSection.draw_blocker
<codedag.plan.loader.LoaderSection.draw_blocker>`), so the plan records what the samples draw
from. :func:`probe_draws` loads a few samples in this process and reports:

* ``random``, ``numpy.random``, ``torch``: the global state a sample's loading moved (the states
  torch's worker loop seeds in each worker);
* ``<Dataset>.<attribute>``: a generator the data set holds (``random.Random``, a NumPy
  ``Generator`` or ``RandomState``, a ``torch.Generator``) whose state moved;
* ``unseeded``: a sample that differs when loaded twice with every state above the same (the
  clock, ``os.urandom``, a generator the probe did not find).

Every state is put back afterwards: probing changes nothing the program draws later.
"""

from __future__ import annotations

import logging
import random
from typing import Any

log = logging.getLogger(__name__)

PROBE_SAMPLES = 2
"""Samples loaded (each twice): enough to see a draw that every sample makes."""


def _generators() -> tuple[type, ...]:
    import numpy as np
    import torch

    return (random.Random, np.random.Generator, np.random.RandomState, torch.Generator)


def _get(generator: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    if isinstance(generator, np.random.RandomState):
        return generator.get_state(legacy=False)
    if isinstance(generator, torch.Generator):
        return generator.get_state()
    return generator.getstate()


def _set(generator: Any, state: Any) -> None:
    import numpy as np
    import torch

    if isinstance(generator, np.random.Generator):
        generator.bit_generator.state = state
    elif isinstance(generator, np.random.RandomState | torch.Generator):
        generator.set_state(state)
    else:
        generator.setstate(state)


def _held(dataset: Any) -> dict[str, Any]:
    """Generators the data set holds: its attributes, and theirs one level down."""
    out: dict[str, Any] = {}
    kinds = _generators()
    owner = type(dataset).__qualname__
    for name, value in list(getattr(dataset, "__dict__", {}).items()):
        if isinstance(value, kinds):
            out[f"{owner}.{name}"] = value
            continue
        for inner, item in list(getattr(value, "__dict__", {}).items()):
            if isinstance(item, kinds):
                out[f"{owner}.{name}.{inner}"] = item
    return out


class _States:
    """The global random states and the data set's generators: read, compare, put back."""

    def __init__(self, held: dict[str, Any]) -> None:
        self.held = held

    def read(self) -> dict[str, Any]:
        import numpy as np
        import torch

        states = {
            "random": random.getstate(),
            "numpy.random": np.random.get_state(legacy=False),
            "torch": torch.get_rng_state(),
        }
        states.update({name: _get(g) for name, g in self.held.items()})
        return states

    def write(self, states: dict[str, Any]) -> None:
        import numpy as np
        import torch

        random.setstate(states["random"])
        np.random.set_state(states["numpy.random"])
        torch.set_rng_state(states["torch"])
        for name, generator in self.held.items():
            _set(generator, states[name])


def _equal(a: Any, b: Any) -> bool:
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b, equal_nan=True))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # an object without a plain comparison: taken as the same
        return True


def probe_draws(loader: Any, samples: int = PROBE_SAMPLES) -> list[str] | None:
    """What ``loader``'s samples draw random numbers from (see the module docstring).

    Returns:
        The sources found (empty: none), or ``None`` when the samples cannot be loaded by
        index (an iterable data set) or loading one fails: the plan then takes them as drawing.
    """
    dataset = loader.dataset
    try:
        count = min(len(dataset), samples)
    except TypeError:
        return None
    if not hasattr(dataset, "__getitem__") or count < 1:
        return None
    states = _States(_held(dataset))
    saved = states.read()
    found: list[str] = []
    try:
        for index in range(count):
            before = states.read()
            first = dataset[index]
            after = states.read()
            found += [k for k in before if k not in found and not _equal(before[k], after[k])]
            states.write(before)
            second = dataset[index]
            if not _equal(first, second) and "unseeded" not in found:
                found.append("unseeded")
    except Exception as error:  # the tuning itself reports a loader that cannot load
        log.info("random draws not probed: loading a sample failed: %s", error)
        return None
    finally:
        states.write(saved)
    return found
