"""The migration plan: one model for the file ``codedag optimize`` writes and everything that reads it.

``OptimizerManager`` builds a :class:`MigrationPlan`; ``codedag plan explain``, ``codedag migrate``
and :class:`~codedag.migrate.api.PipelineMigrator` validate a plan through the same model, so a plan
one of them accepts is a plan all of them accept. The public API (the original) passes plans around as
JSON dicts (``plan.get("context_device_map")``, ``json.dump(plan)``): :meth:`MigrationPlan.to_dict`
and :meth:`MigrationPlan.from_dict` convert at that boundary.

Versions: 1 is the format before measured placement (no ``schema_version`` key means 1); version 2
adds the calibrated times behind every decision (``original_ns``, ``backend_ns``, ``basis``) and
the ``placement`` section. Old files load with defaults; a version newer than this codedag reads,
or one that is not a positive integer, is refused. The optional ``loader`` section (DataLoader
settings chosen by ``codedag tune``, :mod:`codedag.plan.loader`) and the optional ``cache``
section (the prefix cache's cuts, :mod:`codedag.plan.cache`) and the optional ``tables`` section
(:mod:`codedag.plan.tables`) need no new version: plans without them load with ``None``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from codedag.errors import SchemaError
from codedag.plan.cache import CacheSection
from codedag.plan.loader import LoaderSection
from codedag.plan.names import ContextKey, FunctionName
from codedag.plan.tables import TablesSection

PLAN_SCHEMA_VERSION = 2
DEVICE_KINDS = ("cuda", "mps", "xpu")

Basis = Literal["measured", "assumed", "none"]


def check_device(value: str) -> str:
    """A device string a plan may name: ``cpu``, ``cuda``, ``cuda:<i>`` (also ``mps``/``xpu``).

    Raises:
        ValueError: anything else (``cuda:-1``, ``gpu``, ``cuda:x``).
    """
    if value == "cpu":
        return value
    kind, sep, index = value.partition(":")
    if kind in DEVICE_KINDS and (not sep or (index.isdigit() and index.isascii())):
        return value
    raise ValueError(f"device {value!r} is not 'cpu', 'cuda' or 'cuda:<index >= 0>'")


Device = Annotated[str, AfterValidator(check_device)]
"""A device string checked by :func:`check_device`."""


class _Model(BaseModel):
    # Unknown keys are kept (a plan edited by hand or written by a newer minor version still
    # round-trips); known keys are type-checked strictly.
    model_config = ConfigDict(extra="allow", strict=True, validate_assignment=True)


class PlannedCall(_Model):
    """One call (or cluster of isomorphic calls) of the traced DAG and where it runs.

    Attributes:
        function: canonical name (``cv2.resize``).
        context_keys: the tracer's context keys of every instance (of a function with no
            torch backend, which one entry stands for, the first few: nothing patches it).
        instance_count: how many traced calls this entry stands for.
        device: where the calls run (``cpu`` when they stay).
        migrate: whether the calls run through a torch backend.
        measured_ns: traced wall time of all instances (what tracing saw).
        original_ns: calibrated time of one call with the original library, median.
        backend_ns: calibrated time of one call through the migrated path, median.
        transfer_ns: host<->device copies this placement causes per call (0 on the CPU).
        spread_ns: measurement spread: half-width of the saving's 95 % interval
            (:mod:`codedag.measure`).
        saving_ns: time saved by the placement over all instances (negative: a loss).
        basis: ``measured`` (calibrated), ``assumed`` (``--assume-speedup``), ``none``.
        reason: why the call goes where it goes, with the figures.
        estimated_gain_ns: version 1 name of the saving (kept for old readers).
        transfer_cost_ns: version 1 name of the transfer cost (kept for old readers).
    """

    function: FunctionName
    context_keys: list[ContextKey] = Field(default_factory=list)
    instance_count: int = Field(default=1, ge=0)
    device: Device = "cpu"
    migrate: bool = False
    measured_ns: int = 0
    original_ns: int | None = None
    backend_ns: int | None = None
    transfer_ns: int = 0
    spread_ns: int = 0
    saving_ns: int = 0
    basis: Basis = "none"
    reason: str = ""
    estimated_gain_ns: int = 0
    transfer_cost_ns: int = 0

    @field_validator("context_keys")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        if not all(key.strip("/") for key in value):
            raise ValueError("context keys must be non-empty strings")
        return value

    @property
    def in_use(self) -> bool:
        """Whether applying the plan patches this call's function (it is placed)."""
        return self.migrate


class PlacementInfo(_Model):
    """How the placement was decided (version 2).

    Attributes:
        basis: ``measured`` (calibration on the target device), ``assumed`` (a what-if speedup
            given by the user), ``none`` (nothing could be placed: no target device).
        device: the device the measurements were taken on.
        device_name: its description (CPU model and threads, GPU name).
        margin_pct: a call moves only when it saves more than this share of its time.
        assumed_speedup: the what-if speedup, when ``basis`` is ``assumed``.
        only: functions the user restricted placement to (opting them in when blocked).
        exclude: functions the user kept on the CPU.
        calibration_cache: the cache file the measurements came from or went to.
        dispatch_ns: measured cost a patched call adds (migrated path), per call.
        passthrough_ns: measured cost a patched call adds when it runs the original, per call.
    """

    basis: Basis = "none"
    device: Device | None = None
    device_name: str = ""
    margin_pct: float = Field(default=10.0, ge=0)
    assumed_speedup: float | None = Field(default=None, gt=0)
    only: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    calibration_cache: str | None = None
    dispatch_ns: int = 0
    passthrough_ns: int = 0


BatchedMode = Literal["auto", "always", "never"]


class BatchedChain(_Model):
    """One per-sample chain of the traced pipeline and whether it runs batched (version 2).

    Attributes:
        id: the chain's name (``chain0``).
        steps: the chain's operations in order (``cv2.resize``, ``operator.truediv``, ...).
        functions: library functions the chain records (patched while the plan is applied).
        entries: context keys of the calls that start the chain (its first deferred calls).
        entry_functions: the functions of those calls.
        samples: traced samples that ran this chain.
        batched: whether it runs batched.
        original_ns: the per-sample chain with the original libraries, for one batch.
        batched_ns: the chain as one batched run on the device, for one batch.
        batch_size: samples per batch the two times are for.
        backend_calls: backend calls of one batched run.
        basis: ``measured``, ``assumed`` (``always``/``never`` without a measurement) or ``none``.
        reason: why, with the figures.
    """

    id: str
    steps: list[str] = Field(default_factory=list)
    functions: list[FunctionName] = Field(default_factory=list)
    entries: list[ContextKey] = Field(default_factory=list)
    entry_functions: list[FunctionName] = Field(default_factory=list)
    samples: int = Field(default=0, ge=0)
    batched: bool = False
    original_ns: int | None = None
    batched_ns: int | None = None
    batch_size: int = Field(default=0, ge=0)
    backend_calls: int | None = None
    basis: Basis = "none"
    reason: str = ""

    @property
    def in_use(self) -> bool:
        """Whether applying the plan patches this chain's functions (it runs batched)."""
        return self.batched


class BatchedInfo(_Model):
    """Batched execution of the plan (version 2; absent in older plans: nothing runs batched).

    Attributes:
        mode: ``auto`` (a chain runs batched where calibration measured it faster), ``always``,
            ``never``.
        device: where batched chains run (the main process's device).
        chains: every chain found, with its decision.
    """

    mode: BatchedMode = "auto"
    device: Device | None = None
    chains: list[BatchedChain] = Field(default_factory=list)


class MigrationPlan(_Model):
    """Where each traced call runs, and why (``migration_plan.json``).

    Attributes:
        schema_version: format version (:data:`PLAN_SCHEMA_VERSION`).
        codedag_version: the codedag that wrote it.
        k: number of partitions.
        gpu_count: accelerators the plan was made for.
        target_device: the device placed calls run on, ``None`` when nothing can move.
        partition_device_map: partition id -> device.
        context_device_map: context key -> device of every placed call (what the migrator reads).
        calls: every traced call with its decision.
        notes: what a reader should know about the plan as a whole.
        placement: how the decisions were made (version 2).
        loader: DataLoader settings chosen by measurement (``codedag tune``), or ``None``.
        batched: chains run once per batch in the main process (version 2).
        cache: each sample's deterministic prefix and where the prefix cache cuts it, or
            ``None`` (nothing cached).
        tables: where element-wise runs on uint8 arrays start, computed through lookup tables,
            or ``None``.
    """

    schema_version: int = PLAN_SCHEMA_VERSION
    codedag_version: str = ""
    k: int = Field(default=1, ge=1)
    gpu_count: int = Field(default=0, ge=0)
    target_device: Device | None = None
    partition_device_map: dict[str, str] = Field(default_factory=dict)
    context_device_map: dict[ContextKey, str]
    calls: list[PlannedCall] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    placement: PlacementInfo = Field(default_factory=PlacementInfo)
    loader: LoaderSection | None = None
    batched: BatchedInfo = Field(default_factory=BatchedInfo)
    cache: CacheSection | None = None
    tables: TablesSection | None = None

    @field_validator("partition_device_map", "context_device_map")
    @classmethod
    def _devices(cls, value: dict[str, str]) -> dict[str, str]:
        for key, device in value.items():
            if not key.strip("/"):
                raise ValueError("keys must be non-empty strings")
            try:
                check_device(device)
            except ValueError as e:
                raise ValueError(f"{key!r}: {e}") from None
        return value

    # ------------------------------------------------------------------ conversion
    @classmethod
    def from_dict(cls, data: Any, source: str = "migration plan") -> MigrationPlan:
        """Validate a plan dict (any supported version); every problem in one SchemaError.

        Args:
            data: the parsed JSON.
            source: how to name the plan in messages (a file path).

        Raises:
            SchemaError: not an object, unsupported version, or fields of the wrong type.
        """
        if isinstance(data, MigrationPlan):
            return data
        if not isinstance(data, dict):
            raise SchemaError(f"{source}: expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version", 1)
        if type(version) is not int or version < 1:
            raise SchemaError(
                f"{source}: schema_version must be a positive integer, got {version!r}"
            )
        if version > PLAN_SCHEMA_VERSION:
            raise SchemaError(
                f"{source}: schema_version {version} is newer than this codedag reads "
                f"(<= {PLAN_SCHEMA_VERSION}); upgrade codedag"
            )
        if "context_device_map" not in data:
            raise SchemaError(
                f"{source}: missing 'context_device_map' (is this a migration plan? "
                "`codedag optimize` writes one)"
            )
        try:
            plan = cls.model_validate(data)
        except ValidationError as e:
            raise SchemaError(f"malformed {source}: {_problems(e)}") from None
        return plan

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (written at the current schema version)."""
        data = self.model_dump(mode="json")
        data["schema_version"] = PLAN_SCHEMA_VERSION
        if data.get("loader") is None:
            data.pop("loader", None)  # a plan without loader settings is written as before
        for optional in ("cache", "tables"):
            if data.get(optional) is None:
                data.pop(optional, None)
        return data

    # ------------------------------------------------------------------ queries
    @property
    def migrated_functions(self) -> list[str]:
        """Functions with at least one placed call, sorted."""
        return sorted({c.function for c in self.calls if c.migrate})

    @property
    def devices(self) -> set[str]:
        """Every device that placed calls run on."""
        return set(self.context_device_map.values())


def _problems(error: ValidationError, limit: int = 8) -> str:
    """Pydantic's errors as one line: ``calls.0.device: ...; k: ...``."""
    parts = []
    for item in error.errors()[:limit]:
        where = ".".join(str(p) for p in item["loc"]) or "plan"
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    more = error.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "; ".join(parts)
