"""Static-shape segments of a batch captured once as a graph and replayed for later batches.

On CUDA every aten op of a batch is at least one kernel launch; a steady batch of an image chain
is dozens of them. The executor hands the runs of rounds that all its groups run together
(*segments*, :mod:`.segments`) to a :class:`GraphCache` as functions of their input tensors,
each with a *signature* (the rounds' ops and static arguments, the inputs' shapes, dtypes and
strides, constants). The cache runs a segment eagerly the first time its signature is seen;
the second time it captures it through its :class:`GraphBackend` (:class:`CudaGraphs`: warm-up
on a side stream, static input buffers, ``torch.cuda.CUDAGraph``; constants the segment copies
from the host are staged on the device first, :mod:`.staging`), replays the capture on the same
inputs and compares the replay with the eager result bit for bit; later batches with that
signature copy their inputs into the static buffers and replay it (one graph launch), their
outputs cloned before the next replay.

Safety first: a host sync in the segment (counted by
:class:`codedag.measure.launches.LaunchCounter` on the eager run before capturing), a capture or
replay error, or a first replay that differs refuses the signature (it runs eagerly from then
on), with one INFO line and a count in :class:`CaptureStats`; after :data:`REFUSALS_OFF`
refusals, or :data:`CHURN_LIMIT` segments in a row with signatures never seen before and no
graph replayed, capture stops for the executor. A refused batch is the eager one: never a wrong
batch. At most ``limit`` graphs are kept (least recently replayed dropped first).

The backend is a protocol so the logic runs on the CPU in tests with a backend that records the
function instead of capturing it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

import torch

from codedag.backends.batched.staging import Staging
from codedag.devices.torch_devices import cuda_available
from codedag.measure.launches import LaunchCounter

log = logging.getLogger(__name__)

GRAPHS = 8
"""Captured graphs kept per executor (each holds its own memory pool)."""
CHURN_LIMIT = 16
"""Segments in a row with a new signature (and nothing replayed) after which capture stops."""
REFUSALS_OFF = 4
"""Refused signatures after which capture stops for the executor."""
_SEEN = 64
"""Signatures remembered (seen once, or refused), least recent dropped first."""
WARMUP = 3
"""Eager runs on a side stream before capturing (as PyTorch documents for CUDA graphs)."""

Tail = Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]
"""A segment of a batch: its input tensors -> its outputs, the same ops every call for one
signature."""


class Captured(Protocol):
    """One captured segment."""

    def replay(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The function on ``inputs`` (shaped as at capture); tensors the caller owns."""
        ...

    def release(self) -> None:
        """Free what the capture holds (its memory pool)."""
        ...


class GraphBackend(Protocol):
    """Captures segments."""

    def capture(self, fn: Tail, inputs: Sequence[torch.Tensor]) -> Captured:
        """``fn`` captured for inputs shaped as ``inputs`` (which it may run on)."""
        ...


class _CudaCaptured:
    __slots__ = ("graph", "last", "out", "staging", "static")

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        static: list[torch.Tensor],
        out: list[torch.Tensor],
        staging: Staging,
    ) -> None:
        self.graph = graph
        self.static = static
        self.out = out
        self.staging = staging  # the constants the graph copies from live as long as it
        self.last: torch.cuda.Stream | None = None

    def replay(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        stream = torch.cuda.current_stream()
        if self.last is not None and self.last != stream:
            stream.wait_stream(self.last)  # the buffers are the last replay's until it is done
        self.last = stream
        for buffer, value in zip(self.static, inputs, strict=True):
            buffer.copy_(value)
        self.graph.replay()
        return [out.clone() for out in self.out]  # the next replay overwrites ``out``

    def release(self) -> None:
        self.graph.reset()
        self.static = []
        self.out = []
        self.staging.kept = []


class CudaGraphs:
    """Captures with ``torch.cuda.CUDAGraph`` on the current CUDA device."""

    def capture(self, fn: Tail, inputs: Sequence[torch.Tensor]) -> Captured:
        """Warm-up on a side stream (lazy caches fill there; the last run records the segment's
        host->device copies of constants, :mod:`.staging`), then one capture (errors of this
        thread only) with those copies answered from the device."""
        static = [t.clone() for t in inputs]
        staging = Staging("cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP - 1):
                fn(static)
            with staging:
                fn(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"), staging.replaying():
            out = fn(static)
        staging.finished()
        return _CudaCaptured(graph, static, out, staging)


@dataclass
class CaptureStats:
    """What a :class:`GraphCache` did.

    Attributes:
        segments: segments handed to it.
        eager: segments run eagerly (signature new, refused, or capture off).
        captured: graphs captured and kept (their first replay identical).
        replays: segments replayed from a graph.
        evicted: graphs dropped to keep at most ``limit``.
        refused: refused signatures by reason (``sync``, ``error``, ``mismatch``).
        off: why capture stopped for the executor (empty: it did not).
    """

    segments: int = 0
    eager: int = 0
    captured: int = 0
    replays: int = 0
    evicted: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    off: str = ""

    def as_dict(self) -> dict[str, object]:
        """The counters as a plain dict."""
        return asdict(self)


class GraphCache:
    """Signatures seen, graphs captured and replayed (see the module docstring).

    Args:
        backend: what captures (:class:`CudaGraphs` on CUDA).
        limit: graphs kept at most.
    """

    def __init__(self, backend: GraphBackend, limit: int = GRAPHS) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.backend = backend
        self.limit = limit
        self.stats = CaptureStats()
        self._graphs: OrderedDict[Hashable, Captured] = OrderedDict()
        self._seen: OrderedDict[Hashable, str] = OrderedDict()
        self._refused: OrderedDict[Hashable, str] = OrderedDict()
        self._new_in_a_row = 0

    @property
    def on(self) -> bool:
        """Whether segments may still be captured."""
        return not self.stats.off

    @property
    def graphs(self) -> int:
        """Graphs held now."""
        return len(self._graphs)

    def run(
        self, signature: Hashable, fn: Tail, inputs: Sequence[torch.Tensor]
    ) -> list[torch.Tensor]:
        """The function's outputs for ``inputs``: eager, captured now, or replayed."""
        stats = self.stats
        stats.segments += 1
        if stats.off or signature in self._refused:
            stats.eager += 1
            return fn(inputs)
        graph = self._graphs.get(signature)
        if graph is not None:
            self._graphs.move_to_end(signature)
            self._new_in_a_row = 0
            try:
                out = graph.replay(inputs)
            except Exception as error:  # the graph is unusable: drop it, run this one eagerly
                self._drop(signature)
                self._refuse(signature, "error", f"replay: {type(error).__name__}: {error}")
                stats.eager += 1
                return fn(inputs)
            stats.replays += 1
            return out
        if signature not in self._seen:
            _remember(self._seen, signature, "")
            self._new_in_a_row += 1
            if self._new_in_a_row >= CHURN_LIMIT and not self._graphs:
                self._turn_off(f"{CHURN_LIMIT} segments in a row had signatures never seen before")
            stats.eager += 1
            return fn(inputs)
        self._new_in_a_row = 0
        del self._seen[signature]
        stats.eager += 1
        return self._capture(signature, fn, inputs)

    def clear(self) -> None:
        """Drop every graph (their memory pools with them)."""
        for signature in list(self._graphs):
            self._drop(signature)

    # -- capture ----------------------------------------------------------------------------------
    def _capture(
        self, signature: Hashable, fn: Tail, inputs: Sequence[torch.Tensor]
    ) -> list[torch.Tensor]:
        with LaunchCounter() as counted:
            eager = fn(inputs)
        if counted.total_syncs:
            names = ", ".join(sorted(counted.syncs))
            self._refuse(signature, "sync", f"host syncs in the segment ({names})")
            return eager
        try:
            captured = self.backend.capture(fn, inputs)
        except Exception as error:
            self._refuse(signature, "error", f"capture: {type(error).__name__}: {error}")
            return eager
        try:
            replayed = captured.replay(inputs)
        except Exception as error:
            captured.release()
            self._refuse(signature, "error", f"replay: {type(error).__name__}: {error}")
            return eager
        if len(eager) != len(replayed) or not all(map(identical, eager, replayed)):
            captured.release()
            self._refuse(signature, "mismatch", "the first replay differs from the eager run")
            return eager
        self._graphs[signature] = captured
        self.stats.captured += 1
        while len(self._graphs) > self.limit:
            oldest = next(iter(self._graphs))
            self._drop(oldest)
            self.stats.evicted += 1
        return eager

    def _drop(self, signature: Hashable) -> None:
        graph = self._graphs.pop(signature, None)
        if graph is not None:
            graph.release()

    def _refuse(self, signature: Hashable, reason: str, detail: str) -> None:
        refused = self.stats.refused
        refused[reason] = refused.get(reason, 0) + 1
        _remember(self._refused, signature, reason)
        log.info("batched segment runs eagerly, not as a graph (%s: %s)", reason, detail[:300])
        if sum(refused.values()) >= REFUSALS_OFF:
            self._turn_off(f"{REFUSALS_OFF} signatures refused")

    def _turn_off(self, reason: str) -> None:
        self.stats.off = reason
        self.clear()
        log.info("batched segments: graph capture off (%s)", reason)


def _remember(table: OrderedDict[Hashable, str], key: Hashable, value: str) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > _SEEN:
        table.popitem(last=False)


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bits (NaNs included, ``-0.0`` apart from ``0.0``)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(_bits(a), _bits(b))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def for_device(
    device: torch.device, enabled: bool = True, limit: int = GRAPHS
) -> GraphCache | None:
    """The graph cache an executor on ``device`` uses: CUDA graphs on CUDA, else none."""
    if not enabled or device.type != "cuda" or not cuda_available():
        return None
    return GraphCache(CudaGraphs(), limit)
