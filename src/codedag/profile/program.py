"""What ``codedag profile`` runs: a training step and, optionally, the batches it consumes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StepProgram:
    """A training step to profile and, optionally, the batches it consumes.

    Attributes:
        step: runs one full training step (forward, backward, optimizer); it receives one batch
            from ``batches``, or no argument when ``batches`` is None.
        batches: an iterable of batches (a DataLoader); restarted when exhausted. None: the step
            fetches its own data and the data wait is not measured.
        name: label used for the trace file.
        info: facts about the program recorded in the results (e.g. parameter count).
    """

    step: Callable[..., Any]
    batches: Iterable[Any] | None = None
    name: str = "step"
    info: dict[str, Any] = field(default_factory=dict)
