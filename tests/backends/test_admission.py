"""Names from plans and DAGs are admitted by the registry before anything is imported.

A plan from elsewhere naming ``somemodule.f`` in any section must not import ``somemodule``; a
function that must stay on the CPU refuses the plan, whichever section names it; every function
replaced is counted by ``apply()`` and listed by ``patched_functions()``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

import cv2
import pytest
from batched_support import CHAIN, plan
from pydantic import BaseModel

from codedag.backends.admission import admit_dag, admit_plan
from codedag.cli.main import main
from codedag.errors import MigrationError
from codedag.migrate.api import PipelineMigrator
from codedag.plan import MigrationPlan
from codedag.plan.names import field_role, named_functions

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


IN_PLACE_FIELDS = [
    "cache.source_function",
    "cache.functions",
    "cache.guards",
    "tables.producer",
    "tables.guards",
]


def in_place_plan(field: str, name: str, folder: Path) -> dict[str, Any]:
    """A plan whose cache or tables section names ``name`` in ``field``, its other names real."""
    data: dict[str, Any] = {"context_device_map": {}}
    if field.startswith("cache."):
        chain: dict[str, Any] = {
            "id": "prefix0",
            "source_function": "cv2.imread",
            "callers": ["app.DS.__getitem__"],
            "functions": ["cv2.imread", "cv2.resize"],
            "guards": ["cv2.flip"],
            "cached": True,
            "cut": {"step": "cv2.resize"},
        }
        key = field.removeprefix("cache.")
        chain[key] = name if key == "source_function" else [*chain[key], name]
        data["cache"] = {"folder": str(folder), "chains": [chain]}
    else:
        run = {"producer": name if field == "tables.producer" else "cv2.warpAffine"}
        guards = ["torch.from_numpy", *([name] if field == "tables.guards" else [])]
        data["tables"] = {"runs": [{**run, "callers": ["app.DS.__getitem__"]}], "guards": guards}
    return data


@pytest.mark.parametrize("field", IN_PLACE_FIELDS)
def test_a_cache_or_tables_field_naming_an_unknown_module_never_imports_it(
    probe_module: Path, field: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"{PROBE}.f"
    migrator = PipelineMigrator.from_plan(in_place_plan(field, name, tmp_path / "c"), guard=False)
    assert name in migrator.admission.unknown
    kept = cv2.resize if field.startswith("cache") else cv2.warpAffine
    with caplog.at_level(logging.WARNING, logger="codedag"), migrator:
        assert not any(n.startswith(PROBE) for n in migrator.patched_functions())
        if field.endswith("guards"):  # the rest of the section still applies
            assert (cv2.resize if field.startswith("cache") else cv2.warpAffine) is not kept
    assert not probe_module.exists() and PROBE not in sys.modules
    lines = [r.getMessage() for r in caplog.records if PROBE in r.getMessage()]
    assert len(lines) == 1 and "stay unpatched" in lines[0], lines
    if field.startswith("cache.") and not field.endswith("guards"):
        assert not migrator.cache.active and "not cached: prefix0" in lines[0]


@pytest.mark.parametrize("field", IN_PLACE_FIELDS)
def test_codedag_migrate_and_plan_explain_never_import_a_module_a_section_names(
    probe_module: Path, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(in_place_plan(field, f"{PROBE}.f", tmp_path / "c")))
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    assert main(["plan", "explain", str(plan_file)]) == 0
    explained = capsys.readouterr().out
    assert "1 function(s) not in the registry" in explained and f"{PROBE}.f" in explained
    assert main(["migrate", str(plan_file), "--no-guard", "--", "python", str(script)]) == 0
    assert "ran" in capsys.readouterr().out
    assert not probe_module.exists() and PROBE not in sys.modules


@pytest.mark.parametrize("field", IN_PLACE_FIELDS)
def test_python_io_in_a_cache_or_tables_field_refuses_the_plan(field: str, tmp_path: Path) -> None:
    system = os.system
    migrator = PipelineMigrator.from_plan(
        in_place_plan(field, "os.system", tmp_path / "c"), guard=False
    )
    with pytest.raises(MigrationError, match=r"must stay on the CPU: os\.system"):
        migrator.apply()
    assert os.system is system and not migrator.is_applied()


def test_library_functions_kept_on_the_cpu_are_admitted_where_they_run(tmp_path: Path) -> None:
    data = in_place_plan("cache.functions", "numpy.frombuffer", tmp_path)
    data["cache"]["chains"].append(
        {"id": "off", "source_function": "subprocess.run", "cached": False}
    )
    data["tables"] = {"mode": "off", "runs": [{"producer": "os.system"}]}
    admission = admit_plan(MigrationPlan.from_dict(data))
    assert admission.refused == {} and admission.unknown == {}  # unused sections refuse nothing
    assert {"cv2.imread", "numpy.frombuffer", "cv2.flip"} <= admission.in_place
    assert not admission.allows("cv2.imread")  # patched where it runs, never moved
    assert admission.allows_in_place("cv2.imread") and admission.allows_in_place("cv2.resize")


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
    from codedag.calibrate.run import calibrate_dag
    from codedag.calibrate.saved_times import CalibrationCache
    from codedag.graph.model import ExecutionDAG

    dag = ExecutionDAG()
    dag.add_call(name=f"{PROBE}.f", args=[])
    dag.add_call(name="os.system", args=[])
    admission = admit_dag(dag)
    assert set(admission.unknown) == {f"{PROBE}.f"} and set(admission.refused) == {"os.system"}
    calibration = calibrate_dag(dag, "cpu", cache=CalibrationCache(None))
    assert calibration.measurements == {} and calibration.calls == {}
    assert not probe_module.exists() and PROBE not in sys.modules


# Fields of the plan models that hold text but never a function the runtime imports or patches:
# each must be declared here or typed FunctionName/ContextKey/LibraryFunction, so a new field
# cannot slip past admission.
NOT_NAMES = {
    "MigrationPlan": {"codedag_version", "target_device", "partition_device_map", "notes"},
    "PlannedCall": {"device", "reason"},
    "PlacementInfo": {"device", "device_name", "only", "exclude", "calibration_cache"},
    "BatchedChain": {"id", "steps", "reason"},
    "BatchedInfo": {"device"},
    "CacheSection": {"folder", "note", "first_epoch"},
    "CacheChain": {"id", "source_kind", "source_slot", "callers", "context_keys", "steps", "stop",
                   "reason"},
    "CacheCut": {"step", "dtype"},
    "SkippedSource": {"function", "caller", "reason"},
    "TablesSection": {"note"},
    "TableRun": {"callers", "calls", "consumer"},
    "LoaderSection": {"changed", "reason", "fixed", "override", "dataset", "cpu_limit_source",
                      "step_source", "device", "machine", "draws"},
    "WarmLoader": {"changed", "reason"},
    "LoaderTrial": {"phase", "note"},
}  # fmt: skip

# Fields whose names say they may hold functions, yet whose strings are never resolved, imported
# or patched (shown, or compared by name at run time), with why: any other must declare a role.
NEVER_RESOLVED = {
    "BatchedChain.steps": "the chain's operations, shown and compared by name",
    "CacheChain.steps": "the chain's calls up to its cut, shown",
    "CacheChain.callers": "user functions matched against the calling frame's name",
    "CacheChain.context_keys": "traced keys, shown",
    "CacheCut.step": "the cut, compared with the name of a patched function's call",
    "SkippedSource.function": "a sample's first call that starts no chain, shown with why",
    "SkippedSource.caller": "the user function making that call, shown",
    "TableRun.callers": "user functions matched against the calling frame's name",
    "TableRun.calls": "the run's element-wise calls, computed through the array's operators",
    "TableRun.consumer": "what took the run's last value, shown",
    "PlacementInfo.device_name": "a device's description",
    "LoaderSection.step_source": "where the step time came from, shown",
}
FUNCTION_FIELD = re.compile(r"function|producer|consumer|guard|step|name|caller|entr|key")


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
    models = _models(MigrationPlan)
    assert {"CacheChain", "CacheCut", "TableRun", "LoaderSection"} <= set(models)
    undeclared = []
    for name, cls in models.items():
        for field, info in cls.model_fields.items():
            role, _place = field_role(cls, field)
            if role is not None or not _holds_text(info.annotation):
                continue
            if field not in NOT_NAMES.get(name, set()):
                undeclared.append(f"{name}.{field}")
    assert not undeclared, (
        f"declare as FunctionName/ContextKey/LibraryFunction or list in NOT_NAMES: {undeclared}"
    )


def test_every_field_named_for_functions_is_read_by_admission() -> None:
    missed = []
    for name, cls in _models(MigrationPlan).items():
        for field, info in cls.model_fields.items():
            if not FUNCTION_FIELD.search(field) or not _holds_text(info.annotation):
                continue
            role, place = field_role(cls, field)
            if f"{name}.{field}" in NEVER_RESOLVED:
                assert role is None, f"{name}.{field} has a role: drop it from NEVER_RESOLVED"
            elif role is None or not place:
                missed.append(f"{name}.{field}")
    assert not missed, f"fields naming functions that admission does not read: {missed}"


def test_named_functions_reads_keys_and_lists() -> None:
    data = chain_plan(CHAIN, "cv2.resize")
    data["context_device_map"] = {"a#0/b#3/cv2.blur#1": "cpu"}
    found = {(n.where, n.name) for n in named_functions(MigrationPlan.from_dict(data))}
    assert ("context_device_map", "cv2.blur") in found
    assert ("batched.chains.0.entries.0", "cv2.resize") in found
    assert ("batched.chains.0.functions.0", CHAIN[0]) in found
