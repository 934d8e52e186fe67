"""The ``cache`` section of a migration plan: what each sample's deterministic prefix is, and
where the plan cuts it for the prefix cache.

``codedag optimize --cache auto`` writes it (:mod:`codedag.optimize.cache`); ``PipelineMigrator``
applies it (:mod:`codedag.migrate.cache`). Every candidate cut keeps its figures: the traced
time of the calls before it, what reading its value back costs, its bytes per sample. The section
is optional: plans without it load as before (``cache`` is ``None``: nothing is cached).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from codedag.plan.names import LibraryFunction

CacheMode = Literal["auto", "off"]
FirstEpoch = Literal["auto", "all", "paced"]
"""How a plan's first epoch stores values: ``auto`` paces it where storing every value would slow
it by more than :data:`FIRST_EPOCH_SLACK`, ``all`` stores every value in the epoch that computes
it, ``paced`` always paces it (:data:`STORE_SHARE`)."""

STORE_SHARE = 0.03
"""The share of a process's loading time (its DataLoader fetches) that storing values of a chain
may take until the chain has a hit in the epoch, in a paced first epoch: it stores what fits and
leaves the other values for later (computed, delivered, not stored); the next epoch, from its
first hit on, stores every value it computes. A value left for later is computed again, so over a
run of several epochs storing everything at once takes less time: a plan paces only where
storing every value would cost a first epoch more than :data:`FIRST_EPOCH_SLACK`."""


def first_epoch_share(choice: FirstEpoch) -> float | None:
    """The storing share a run's ``choice`` gives the cache: ``None`` for ``auto`` (the plan's),
    0 for ``all``, :data:`STORE_SHARE` for ``paced``."""
    return {"auto": None, "all": 0.0, "paced": STORE_SHARE}[choice]


FIRST_EPOCH_SLACK = 0.03
"""The share of a sample's traced library time that storing its values may add to a first epoch
before the plan paces storing (``first_epoch`` ``auto``)."""

MAX_BUDGET_BYTES = 1 << 50
"""The largest budget a plan or a setting may give a cache tier (1 PiB: more memory or disk than
one machine has; a tier's budget becomes LMDB's map size, which must fit the address space)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, validate_assignment=True)


class CacheCut(_Model):
    """One place a chain could be cut: the value of one of its calls.

    Attributes:
        step: the call whose result is stored (``cv2.resize``, ``operator.truediv``).
        occurrence: which call of that name in the chain (0: the first).
        position: the call's index in the traced chain.
        bytes_per_sample: bytes of its value per source.
        shape: the traced value's shape.
        dtype: the traced value's dtype (or PIL mode).
        prefix_ns: traced time of the calls up to and with the cut, per source.
        read_ns: measured time to read the value back from the store, per source.
        write_ns: measured time to store it, per source (once, in the first epoch).
        saved_ns: ``prefix_ns - read_ns``: what a hit saves, per source.
    """

    step: str
    occurrence: int = Field(default=0, ge=0)
    position: int = Field(default=0, ge=0)
    bytes_per_sample: int = Field(default=0, ge=0)
    shape: list[int] = Field(default_factory=list)
    dtype: str = ""
    prefix_ns: int = Field(default=0, ge=0)
    read_ns: int = Field(default=0, ge=0)
    write_ns: int = Field(default=0, ge=0)
    saved_ns: int = 0


class CacheChain(_Model):
    """One source's chain of calls in ``__getitem__`` and the cut chosen for it.

    Attributes:
        id: the chain's name (``prefix0``).
        source_function: the call that reads the source (``numpy.frombuffer``, ``cv2.imread``).
        source_kind: what identifies the source: ``buffer``, ``file`` or ``array``.
        source_slot: the argument of the source call holding the source (``"0"``, a keyword).
        callers: the function that makes the source call (matched at run time).
        lines: the lines of the caller's code whose source calls start the chain, where one
            caller starts chains of one source function at several lines (matched at run time;
            empty: any line).
        context_keys: the traced context keys of the source calls.
        steps: the chain's calls in order, up to the deepest deterministic one.
        functions: library functions patched while the plan is applied.
        guards: the samples' other functions of the chain's libraries, patched to take a value
            before the cut as its computed array (its chain then computed normally).
        sources: traced sources that ran the chain (several per sample in a mosaic).
        samples: traced samples.
        stop: why the chain cannot be cut later than its last step.
        candidates: every possible cut, with its figures.
        cut: the chosen cut, or ``None``.
        share: the share of the data set's values at the cut that the budget holds.
        cached: whether the chain is cached.
        reason: why, with the figures.
    """

    id: str
    source_function: LibraryFunction
    source_kind: str = ""
    source_slot: str = "0"
    callers: list[str] = Field(default_factory=list)
    lines: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    context_keys: list[str] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)
    functions: list[LibraryFunction] = Field(default_factory=list)
    guards: list[LibraryFunction] = Field(default_factory=list)
    sources: int = Field(default=0, ge=0)
    samples: int = Field(default=0, ge=0)
    stop: str = ""
    candidates: list[CacheCut] = Field(default_factory=list)
    cut: CacheCut | None = None
    share: float = Field(default=1.0, ge=0.0, le=1.0)
    cached: bool = False
    reason: str = ""

    @property
    def in_use(self) -> bool:
        """Whether applying the plan patches this chain's functions (it is cached at a cut)."""
        return self.cached and self.cut is not None


class SkippedSource(_Model):
    """A sample's first call that starts no chain, and why (what it takes is not a source).

    Attributes:
        function: the call (``librosa.load``).
        caller: the function making it.
        reason: why, in one line (``the first call X takes Y, which is not a file``).
        samples: traced samples whose first call it is.
    """

    function: str
    caller: str = ""
    reason: str = ""
    samples: int = Field(default=0, ge=0)


class CacheSection(_Model):
    """The prefix cache of the plan.

    Attributes:
        mode: ``auto`` (cache where a cut saves time) or ``off``.
        budget_bytes: the memory budget the cut was chosen within (the RAM tier's budget; at
            most :data:`MAX_BUDGET_BYTES`).
        folder: the disk tier's folder (``None``: the default).
        dataset_len: items of the traced data set (how many values the cache will hold).
        samples: traced samples the chains were found in.
        bytes_total: bytes the chosen cuts hold for the whole data set.
        saved_ns_per_sample: expected saving per sample from the second epoch on.
        write_ns_per_sample: expected storing cost per sample in the first epoch.
        chains: every chain found, with its decision.
        skipped: samples' first calls that start no chain, with the reason (plans written
            before it load with none).
        note: why nothing is cached, when nothing is.
        sample_ns: a traced sample's library time (median over samples): what storing is
            weighed against in the first epoch.
        store_share: the share of each process's loading time storing may take until a chain
            has a hit in the epoch (:data:`STORE_SHARE` where the first epoch is paced; 0:
            every value is stored in the epoch that computes it, as plans written before it).
        first_epoch: how the first epoch stores values and why, in one line.
    """

    mode: CacheMode = "auto"
    budget_bytes: int = Field(default=0, ge=0, le=MAX_BUDGET_BYTES)
    folder: str | None = None
    dataset_len: int | None = None
    samples: int = Field(default=0, ge=0)
    bytes_total: int = Field(default=0, ge=0)
    saved_ns_per_sample: int = 0
    write_ns_per_sample: int = Field(default=0, ge=0)
    chains: list[CacheChain] = Field(default_factory=list)
    skipped: list[SkippedSource] = Field(default_factory=list)
    note: str = ""
    sample_ns: int = Field(default=0, ge=0)
    store_share: float = Field(default=0.0, ge=0.0, le=1.0)
    first_epoch: str = ""

    @property
    def in_use(self) -> bool:
        """Whether applying the plan may patch anything for the cache (it is not off)."""
        return self.mode != "off"

    @property
    def cached_chains(self) -> list[CacheChain]:
        """The chains the migrator caches."""
        if self.mode == "off":
            return []
        return [c for c in self.chains if c.cached and c.cut is not None]
