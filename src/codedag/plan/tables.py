"""The ``tables`` section of a migration plan: where element-wise runs on uint8 arrays start.

``codedag optimize`` writes it (:mod:`codedag.optimize.tables`) when the trace shows a sample
normalizing a uint8 array with element-wise calls; ``PipelineMigrator`` applies it
(:mod:`codedag.migrate.tables`). Whether a run is gathered through its table is measured where it
runs: each table is compared bit for bit and timed against the calls on the first samples of
every process. The section is optional: plans without it load as before.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from codedag.plan.names import LibraryFunction

TablesMode = Literal["auto", "off"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, validate_assignment=True)


class TableRun(_Model):
    """One traced run of element-wise calls and the call that made its uint8 array.

    Attributes:
        producer: the library call whose result starts the run (``cv2.warpAffine``).
        callers: the functions making that call (matched at run time).
        calls: the run's traced element-wise calls, in order.
        consumer: what took the run's last value (``numpy.transpose``).
        traced_ns: the run's traced time per sample (median over samples).
        samples: traced samples that ran it.
    """

    producer: LibraryFunction
    callers: list[str] = Field(default_factory=list)
    calls: list[str] = Field(default_factory=list)
    consumer: str = ""
    traced_ns: int = Field(default=0, ge=0)
    samples: int = Field(default=0, ge=0)


class TablesSection(_Model):
    """Element-wise runs computed through lookup tables.

    Attributes:
        mode: ``auto`` (runs start where the plan names them) or ``off``.
        runs: the runs found in the trace.
        guards: the samples' functions of libraries that take arrays only (cv2, torch, PIL):
            a run value reaching one is computed first.
        note: why no run is planned, when none is.
    """

    mode: TablesMode = "auto"
    runs: list[TableRun] = Field(default_factory=list)
    guards: list[LibraryFunction] = Field(default_factory=list)
    note: str = ""

    @property
    def in_use(self) -> bool:
        """Whether applying the plan patches the runs' producers and the guards (not off)."""
        return self.mode != "off"

    @property
    def planned(self) -> list[TableRun]:
        """The runs the migrator starts."""
        return [] if self.mode == "off" else list(self.runs)
