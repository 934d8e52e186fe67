"""Run-time settings of batched execution, and the chains a plan places for it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codedag.backends.batched.forcing import GIVE_UP_AFTER
from codedag.errors import ConfigError

DELIVER = ("auto", "host", "device")


@dataclass(frozen=True)
class BatchedSettings:
    """How the main process runs and delivers batches.

    Attributes:
        deliver: ``"auto"`` (default: the first batches on the host, watched; once the training
            loop moves one to the chains' device, the rest stay there:
            :mod:`codedag.migrate.batched.deliver`), ``"host"`` (the training loop receives what
            ``default_collate`` would have produced, one copy back per batch) or ``"device"``
            (the deferred outputs stay on the device: no copy back). Labels and everything not
            deferred are untouched.
        verify: batches (the first ones) also run through the CPU per-sample reference on the
            same recorded arguments and are compared through the tolerance table; a batch that
            differs is replaced by its reference and batched execution stops.
        ahead: batches launched ahead of the training step on a side stream (default: 1 on
            CUDA with DataLoader workers, else 0: with ``num_workers=0`` the next batch's random
            draws would interleave with the training step's).
        give_up_after: values forced in a row at one entry site after which it runs eagerly.
        simulate_transfers: on the CPU, copy payloads and results as a device would (tests of
            the GPU path; counts ``h2d_bytes``/``d2h_bytes``).
        check: time the first batches batched and per sample, in alternating blocks, and stop
            batched execution unless it was faster (:mod:`codedag.migrate.batched.check`);
            only where the plan chose it (``mode: auto``).
        capture: on CUDA, runs of rounds that all of a batch's groups run together are
            captured as a CUDA graph once their signature repeats and replayed for later
            batches, the first replay checked bit for bit against the eager run
            (:mod:`codedag.backends.batched.capture`); no effect on other devices. Off unless
            asked for: its time and memory on a GPU are not measured yet.
        capture_graphs: captured graphs kept at most (the least recently replayed dropped).
    """

    deliver: str = "auto"
    verify: int = 1
    ahead: int | None = None
    give_up_after: int = GIVE_UP_AFTER
    simulate_transfers: bool = False
    check: bool = True
    capture: bool = False
    capture_graphs: int = 8  # capture.GRAPHS (not imported: this module stays free of torch)

    def __post_init__(self) -> None:
        if self.deliver not in DELIVER:
            raise ConfigError(f"deliver must be 'auto', 'host' or 'device', got {self.deliver!r}")
        for name in ("verify", "give_up_after"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        if not isinstance(self.capture, bool):
            raise ConfigError(f"capture must be True or False, got {self.capture!r}")
        graphs = self.capture_graphs
        if not isinstance(graphs, int) or isinstance(graphs, bool) or graphs < 1:
            raise ConfigError(f"capture_graphs must be an integer >= 1, got {graphs!r}")
        if self.ahead is not None and (not isinstance(self.ahead, int) or self.ahead not in (0, 1)):
            raise ConfigError(f"ahead must be 0, 1 or None, got {self.ahead!r}")


@dataclass(frozen=True)
class Chain:
    """One sample chain the plan runs batched.

    Attributes:
        id: the chain's name in the plan.
        functions: library functions of the chain (patched to record deferred arguments).
        entries: context keys of the calls that start deferring (``.../cv2.resize#0``); empty:
            every call of ``entry_functions`` inside a DataLoader fetch starts deferring.
        entry_functions: the functions of those calls.
    """

    id: str
    functions: tuple[str, ...]
    entries: tuple[str, ...] = ()
    entry_functions: tuple[str, ...] = ()


@dataclass
class ChainSet:
    """The chains of a plan placed for batched execution, and where they run."""

    chains: list[Chain] = field(default_factory=list)
    device: str | None = None
    mode: str = "auto"

    @property
    def functions(self) -> list[str]:
        """Every library function recorded by some chain."""
        return sorted({f for c in self.chains for f in c.functions})

    def entries_of(self, function: str) -> list[str]:
        """Context keys at which ``function`` starts deferring (empty: anywhere in a fetch)."""
        keys: list[str] = []
        for chain in self.chains:
            if function in chain.entry_functions:
                keys.extend(k for k in chain.entries if _function_of(k) == function)
        return keys

    @property
    def entry_functions(self) -> list[str]:
        """Functions whose calls start a chain."""
        return sorted({f for c in self.chains for f in c.entry_functions})

    def keep_only(self, allowed: Callable[[str], bool]) -> dict[str, list[str]]:
        """Drop the chains naming a function ``allowed`` rejects (nothing of them is patched).

        Returns:
            chain id -> the rejected names, for each chain dropped.
        """
        dropped: dict[str, list[str]] = {}
        kept = []
        for chain in self.chains:
            named = {*chain.functions, *chain.entry_functions, *map(_function_of, chain.entries)}
            rejected = sorted(n for n in named if not allowed(n))
            if rejected:
                dropped[chain.id] = rejected
            else:
                kept.append(chain)
        self.chains = kept
        return dropped


def _function_of(key: str) -> str:
    from codedag.plan.context import function_of

    return function_of(key)


def chains_from_plan(section: Mapping[str, Any] | Any) -> ChainSet:
    """The placed chains of a plan's ``batched`` section (a dict or the plan model's section)."""
    if section is None:
        return ChainSet()
    data = section.model_dump() if hasattr(section, "model_dump") else dict(section)
    chains: list[Chain] = []
    for raw in data.get("chains") or []:
        if not raw.get("batched"):
            continue
        entries = tuple(raw.get("entries") or ())
        entry_functions = tuple(raw.get("entry_functions") or ()) or tuple(
            sorted({_function_of(k) for k in entries})
        )
        chains.append(
            Chain(
                id=str(raw.get("id", f"chain{len(chains)}")),
                functions=tuple(raw.get("functions") or ()),
                entries=entries,
                entry_functions=entry_functions,
            )
        )
    return ChainSet(chains, data.get("device"), str(data.get("mode", "auto")))
