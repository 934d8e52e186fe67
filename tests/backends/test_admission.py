"""Names from plans and DAGs are admitted by the registry before anything is imported.

A plan from elsewhere naming ``somemodule.f`` in any section must not import ``somemodule``; a
function that must stay on the CPU refuses the plan, whichever section names it; every function
replaced is counted by ``apply()`` and listed by ``patched_functions()``.
"""

from __future__ import annotations

import logging
import os
import sys
import typing
from pathlib import Path
from typing import Any

import cv2
import pytest
from batched_support import CHAIN, plan
from pydantic import BaseModel

from codedag.backends.admission import admit_dag, admit_plan
from codedag.errors import MigrationError
from codedag.migrate.api import PipelineMigrator
from codedag.plan import MigrationPlan, model
from codedag.plan.loader import LoaderSection
from codedag.plan.names import named_functions

PROBE = "codedag_admission_probe"


@pytest.fixture
def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module on sys.path whose import leaves a file behind: proof that it was imported."""
    marker = tmp_path / "imported"
    (tmp_path / f"{PROBE}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef f(*args):\n    return 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, PROBE, raising=False)
    return marker


def chain_plan(functions: list[str], entry: str) -> dict[str, Any]:
    data = plan(functions=functions, entries=[f"app.DS.__getitem__#0/{entry}#0"])
    data["batched"]["chains"][0]["entry_functions"] = [entry]
    return data


@pytest.mark.parametrize(
    "section",
    ["batched_functions", "batched_entry", "context_device_map", "calls"],
)
def test_no_section_of_a_plan_imports_a_module_the_registry_does_not_know(
    probe_module: Path, section: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"{PROBE}.f"
    data = plan()
    if section == "batched_functions":
        data = chain_plan([*CHAIN, name], "cv2.resize")
    elif section == "batched_entry":
        data = chain_plan(CHAIN, name)
    elif section == "context_device_map":
        data["context_device_map"] = {f"app.g#0/{name}#0": "cpu"}
    else:
        data["calls"] = [{"function": name, "migrate": True, "context_keys": [f"a#0/{name}#0"]}]
    migrator = PipelineMigrator.from_plan(data, guard=False)
    with caplog.at_level(logging.WARNING, logger="codedag"), migrator:
        assert not any(n.startswith(PROBE) for n in migrator.patched_functions())
    assert not probe_module.exists() and PROBE not in sys.modules
    if section.startswith("batched"):
        assert migrator.batched.chains.chains == []  # the chain runs per sample
        assert any("run per sample" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("name", ["os.system", "builtins.open"])
@pytest.mark.parametrize("field", ["functions", "entry_functions"])
def test_a_function_kept_on_the_cpu_refuses_the_plan_in_the_batched_section(
    name: str, field: str
) -> None:
    data = chain_plan([*CHAIN, name] if field == "functions" else CHAIN, "cv2.resize")
    if field == "entry_functions":
        data["batched"]["chains"][0]["entry_functions"].append(name)
    system, opener = os.system, open
    migrator = PipelineMigrator.from_plan(data, guard=False)
    with pytest.raises(MigrationError, match=f"must stay on the CPU: {name}"):
        migrator.apply()
    assert os.system is system and open is opener  # nothing was replaced
    assert not migrator.is_applied() and migrator.patched_functions() == []


def test_every_replaced_function_is_counted_and_listed() -> None:
    resize = cv2.resize
    migrator = PipelineMigrator.from_plan(chain_plan(CHAIN, "cv2.resize"), guard=False)
    counts = migrator.apply()
    try:
        listed = migrator.patched_functions()
        assert cv2.resize is not resize
        assert set(CHAIN) <= set(listed)
        assert "numpy.asarray" in listed  # the conversions batched execution records through
        assert counts["patched"] >= len(CHAIN) + 2 and counts["failed"] == 0
    finally:
        migrator.restore()
    assert cv2.resize is resize and migrator.patched_functions() == []


def test_a_flood_of_unknown_names_is_one_line_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cdm = {f"app.f#0/mod{i}.fn\x1b[2J#0": "cpu" for i in range(3000)}
    migrator = PipelineMigrator.from_plan({"context_device_map": cdm}, guard=False)
    with caplog.at_level(logging.INFO, logger="codedag"), migrator:
        pass
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert "3000 function(s) not in the registry" in lines[0] and "2,992 more" in lines[0]
    assert "\x1b" not in lines[0] and "\\x1b[2J" in lines[0]
    assert len(migrator.get_stats()["skipped"]) == 3000


def test_admission_sees_used_names_only() -> None:
    data = chain_plan(CHAIN, "cv2.resize")
    data["calls"] = [
        {"function": "cv2.imread", "context_keys": ["a#0/cv2.imread#0"]},  # kept on the CPU
        {"function": "builtins.open", "migrate": False},
    ]
    data["batched"]["chains"].append({"id": "off", "functions": ["os.system"], "batched": False})
    admission = admit_plan(MigrationPlan.from_dict(data))
    assert admission.refused == {} and admission.unknown == {}
    assert set(CHAIN) <= admission.admitted


def test_a_dag_naming_an_unknown_module_is_never_imported(probe_module: Path) -> None:
    from codedag.calibrate.cache import CalibrationCache
    from codedag.calibrate.run import calibrate_dag
    from codedag.graph.model import ExecutionDAG

    dag = ExecutionDAG()
    dag.add_call(name=f"{PROBE}.f", args=[])
    dag.add_call(name="os.system", args=[])
    admission = admit_dag(dag)
    assert set(admission.unknown) == {f"{PROBE}.f"} and set(admission.refused) == {"os.system"}
    calibration = calibrate_dag(dag, "cpu", cache=CalibrationCache(None))
    assert calibration.measurements == {} and calibration.calls == {}
    assert not probe_module.exists() and PROBE not in sys.modules


# Fields of the plan models that hold text but never a function the runtime uses: each must be
# declared here or typed FunctionName/ContextKey, so a new section cannot slip past admission.
NOT_NAMES = {
    "MigrationPlan": {"codedag_version", "target_device", "partition_device_map", "notes"},
    "PlannedCall": {"device", "reason"},
    "PlacementInfo": {"device", "device_name", "only", "exclude", "calibration_cache"},
    "BatchedChain": {"id", "steps", "reason"},
    "BatchedInfo": {"device"},
}


def _models(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    pending = [root]
    while pending:
        cls = pending.pop()
        if cls.__name__ in found:
            continue
        found[cls.__name__] = cls
        for info in cls.model_fields.values():
            for arg in _flatten(info.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    pending.append(arg)
    return found


def _flatten(annotation: Any) -> list[Any]:
    args = typing.get_args(annotation)
    return [annotation, *(a for arg in args for a in _flatten(arg))]


def _holds_text(annotation: Any) -> bool:
    return any(a is str for a in _flatten(annotation))


def test_every_text_field_of_the_plan_is_declared_a_name_or_not() -> None:
    undeclared = []
    for name, cls in _models(MigrationPlan).items():
        if issubclass(cls, LoaderSection) or cls.__module__ != model.__name__:
            continue  # the loader section holds settings and figures, no function names
        for field, info in cls.model_fields.items():
            typed = str(info.annotation) + str(info.metadata)
            if "NameRole" in typed or not _holds_text(info.annotation):
                continue
            if field not in NOT_NAMES.get(name, set()):
                undeclared.append(f"{name}.{field}")
    assert not undeclared, f"declare as FunctionName/ContextKey or list in NOT_NAMES: {undeclared}"


def test_named_functions_reads_keys_and_lists() -> None:
    data = chain_plan(CHAIN, "cv2.resize")
    data["context_device_map"] = {"a#0/b#3/cv2.blur#1": "cpu"}
    found = {(n.where, n.name) for n in named_functions(MigrationPlan.from_dict(data))}
    assert ("context_device_map", "cv2.blur") in found
    assert ("batched.chains.0.entries.0", "cv2.resize") in found
    assert ("batched.chains.0.functions.0", CHAIN[0]) in found
