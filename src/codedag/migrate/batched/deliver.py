"""Where batched execution delivers a batch: on the host or on the device the chain ran on.

``deliver="host"`` and ``"device"`` are the user's choice. ``"auto"`` (the default) learns it
from the training loop: the first batches (:data:`WATCH_BATCHES`) are delivered on the host as
:class:`~codedag.backends.batched.watch.WatchedTensor` objects; once the loop moves one of them
to the chain's device (``.to(device)``, ``.cuda()``), later batches stay there, with no copy
back (the loop's own ``.to(device)`` of a tensor already there is a no-op, so its code stays
correct). A move elsewhere, or none in the watched batches, keeps delivery on the host. Where
nothing is copied (the CPU device) there is nothing to decide: the host it is.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

WATCH_BATCHES = 2
"""Batches delivered on the host and watched before ``auto`` settles on the host."""


def same_device(a: torch.device, b: torch.device) -> bool:
    """Whether two devices are one (an index left out matches any index)."""
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


class DeliveryChoice:
    """The delivery of batches with records, decided once (see the module docstring).

    Args:
        deliver: ``"auto"``, ``"host"`` or ``"device"``.
        device: where the chains run.
        copies: whether delivering on the host copies anything (``DeviceIO.moves``).
    """

    def __init__(self, deliver: str, device: torch.device | str, copies: bool) -> None:
        self.mode = deliver
        self.device = torch.device(device)
        self.watched = 0
        self.on_device: bool | None = None
        self.reason = ""
        self._lock = threading.Lock()
        if deliver != "auto":
            self._decide(deliver == "device", "set by the user")
        elif not copies:
            self._decide(False, f"nothing is copied back from {self.device}")

    @property
    def deciding(self) -> bool:
        """Whether the batches are still watched."""
        return self.on_device is None

    def _decide(self, on_device: bool, reason: str) -> None:
        self.on_device = on_device
        self.reason = reason

    def batch_finished(self) -> None:
        """A batch with records is about to be delivered (watched, while deciding)."""
        with self._lock:
            if not self.deciding:
                return
            if self.watched >= WATCH_BATCHES:
                self._decide(
                    False,
                    f"the training loop moved none of the first {self.watched} batches to "
                    f"{self.device}",
                )
            else:
                self.watched += 1

    def moved(self, device: torch.device) -> None:
        """The training loop moved a watched tensor to ``device``."""
        with self._lock:
            if not self.deciding:
                return
            if same_device(device, self.device):
                self._decide(True, f"the training loop moves batches to {device}")
            else:
                self._decide(
                    False, f"the training loop moves batches to {device}, not {self.device}"
                )

    def summary(self) -> dict[str, Any]:
        """What ``get_stats()["batched"]["delivery"]`` shows."""
        where = "watching" if self.deciding else "device" if self.on_device else "host"
        return {"mode": self.mode, "on": where, "watched": self.watched, "reason": self.reason}
