"""Fuzzing every command that reads a file: random and mutated DAGs, plans, results and configs.

Each case takes a valid input, mutates it (bytes flipped, cut or inserted; a JSON value replaced,
removed or added, with hostile values: huge, negative, non-finite, deeply nested, paths outside
the run folder; sometimes gzip-compressed) or replaces it with random JSON, and runs every command
that reads it. Every outcome must be a success or exit code 2 with one line on stderr: never a
traceback, never another exit code.

CI runs a fixed set of cases. Longer runs on demand::

    CODEDAG_FUZZ_CASES=500 CODEDAG_FUZZ_SEED=7 bin/test tests/cli/test_fuzz.py

A failure names its kind and case number; the same seed and case reproduce it.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_inputs import SCRIPT, make_dag, make_models_config, make_plan, make_results, run_cli

CASES = int(os.environ.get("CODEDAG_FUZZ_CASES", "12"))
SEED = int(os.environ.get("CODEDAG_FUZZ_SEED", "0"))
KINDS = ("dag", "plan", "plan_explain", "results", "models", "settings")

HOSTILE: list[Any] = [
    None, True, False, 0, -1, 1, 7, 2**63, -(2**63) - 1, 10**30, 0.5, -0.0, 1e308, -1e308,
    float("nan"), float("inf"), float("-inf"), "", "x", "../../../../etc/passwd", "/etc/passwd",
    "x" * 5000, "\u00e9\u0000\n", "cuda:-1", "cuda:5", "cpu", "bogus", "numpy.clip",
    "os.system", "builtins.eval", "a#0/os.system#0", "-1", "1e400",
    "\x1b]0;PWNED\x07\x1b[2J", "[link=file:///etc/passwd]x[/link]", "builtins.open",
    "codedag_fuzz_probe.f", 10**6, 10**9,
]  # fmt: skip
KEYS = ["schema_version", "nodes", "edges", "modes", "calls", "context_device_map", "files",
        "batches", "id", "kind", "name", "repositories", "experiments", "status", "batched",
        "chains", "functions", "entry_functions", "loader", "num_workers"]  # fmt: skip
LOADER_KEYS = ["num_workers", "threads", "prefetch_factor", "persistent_workers", "pin_memory"]


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.6:
        return rng.choice(HOSTILE)
    if roll < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if roll < 0.9:
        return {rng.choice(KEYS): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return nested(rng.choice([40, 99, 101, 300]))


def paths(value: Any, prefix: tuple = (), out: list | None = None) -> list[tuple]:
    """Every path into a JSON document (keys and indexes), parents first."""
    out = [] if out is None else out
    out.append(prefix)
    if isinstance(value, dict):
        for key, item in value.items():
            paths(item, (*prefix, key), out)
    elif isinstance(value, list):
        for index, item in enumerate(value[:50]):
            paths(item, (*prefix, index), out)
    return out


def mutate_json(rng: random.Random, doc: Any) -> Any:
    for _ in range(rng.choice([1, 1, 1, 2, 4])):
        path = rng.choice(paths(doc))
        if not path:
            doc = random_value(rng)
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        action = rng.random()
        if action < 0.5:
            parent[key] = random_value(rng)
        elif action < 0.7:
            del parent[key]
        elif action < 0.85 and isinstance(parent[key], list):
            items = parent[key]
            items.extend(rng.choice([[random_value(rng)], items[:3], []]))
            rng.shuffle(items)
        elif isinstance(parent, dict):
            parent[rng.choice(KEYS)] = random_value(rng)
        else:
            parent.insert(rng.randrange(len(parent) + 1), random_value(rng))
    return doc


def mutate_structure(rng: random.Random, kind: str, doc: Any) -> Any:
    """Mutations that keep the JSON well-typed but break the meaning: the subtler bugs."""
    if kind == "dag" and isinstance(doc.get("nodes"), list) and doc["nodes"]:
        nodes, edges = doc["nodes"], doc.setdefault("edges", [])
        ids = [n["id"] for n in nodes]
        calls = [n for n in nodes if n.get("kind") == "call"]
        action = rng.randrange(7)
        if action == 0:  # an edge to a node that does not exist
            edges.append([rng.choice(ids), max(ids) + 10, "uses"])
        elif action == 1 and len(calls) > 1:  # a cycle between two calls
            a, b = rng.sample(calls, 2)
            edges += [[a["id"], b["id"], "calls"], [b["id"], a["id"], "calls"]]
        elif action == 2:  # a duplicated node
            nodes.append(dict(rng.choice(nodes)))
        elif action == 3:  # every time zero, or huge
            value = rng.choice([0, 2**62, 2**63 - 1])
            for call in calls:
                call["total_ns"] = call["self_ns"] = value
        elif action == 4 and calls:  # a call renamed to something the registry does not know
            rng.choice(calls)["name"] = rng.choice(["os.system", "builtins.eval", "", "x" * 300])
        elif action == 5 and calls:  # odd context keys
            rng.choice(calls)["context_key"] = rng.choice(["", "/", "a#x/b#-1", "#0", "\u00e9#0"])
        else:  # edges only, nodes gone
            doc["nodes"] = []
    elif kind == "plan" and isinstance(doc.get("context_device_map"), dict):
        action = rng.randrange(3)
        if action == 0:
            cdm = doc["context_device_map"]
            key = rng.choice(
                ["", "/", "a#0/os.system#0", "x#0/builtins.eval#0", "m#0/numpy.clip#0"]
            )
            cdm[key] = rng.choice(["cpu", "cuda:5", "cuda:-1", "mps", "cuda", "cuda:0:1", 0])
            if rng.random() < 0.5 and cdm:
                cdm.pop(rng.choice(list(cdm)))
        elif action == 1:  # a batched chain naming hostile functions
            names = [rng.choice(HOSTILE) for _ in range(rng.randrange(1, 4))]
            chain = {"id": rng.choice(HOSTILE), "batched": True, "functions": names}
            chain["entry_functions"] = names[:1]
            section = {"mode": "always", "device": "cpu", "chains": [chain]}
            doc["batched"] = section if rng.random() < 0.8 else random_value(rng)
        else:  # a loader section asking for absurd settings
            chosen = {rng.choice(LOADER_KEYS): rng.choice(HOSTILE) for _ in range(2)}
            doc["loader"] = {"chosen": chosen, "yours": {}, "changed": list(chosen)}
    return doc


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    action = rng.random()
    if action < 0.4 and buf:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    elif action < 0.7:
        del buf[rng.randrange(len(buf) + 1) :]
    else:
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = rng.choice([b"\xff\xfe", b"[" * 150, b'"', b"\x00", b"}{", b"NaN"])
    return bytes(buf)


def mutated(rng: random.Random, kind: str, original: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.2:
        data = mutate_bytes(rng, original)
    elif roll < 0.3:
        data = json.dumps(random_value(rng)).encode()
    elif roll < 0.55 and kind in ("dag", "plan"):
        data = json.dumps(mutate_structure(rng, kind, json.loads(original))).encode()
    else:
        doc = mutate_json(rng, json.loads(original))
        data = json.dumps(doc).encode()
    if rng.random() < 0.1:
        data = gzip.compress(data)
    return data


@pytest.fixture(scope="module")
def probe_on_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An importable module that a plan naming ``codedag_fuzz_probe.f`` must never import."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / "codedag_fuzz_probe.py").write_text("def f(*args):\n    return 1\n")
    sys.path.insert(0, str(folder))
    yield
    sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory, probe_on_path: None) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("originals")
    dag = make_dag(folder)
    models, settings = make_models_config(folder)
    script = folder / "train.py"
    script.write_text(SCRIPT)
    return {
        "dag": dag,
        "plan": make_plan(folder, dag),
        "results": make_results(folder),
        "models": models,
        "settings": settings,
        "script": script,
    }


def commands(kind: str, path: Path, originals: dict[str, Path], tmp: Path, rng: random.Random):
    models = ["--models-config", str(originals["models"])]
    if kind == "dag":
        extra = ["--explain"] if rng.random() < 0.5 else ["--json"]
        if rng.random() < 0.5:  # the what-if path; otherwise calibration measures
            extra += ["--assume-speedup", "8"]
        return [["optimize", path, "--gpus", "0", "--target-device", "cpu", "--out", tmp, *extra]]
    if kind == "plan":
        return [["migrate", path, "--json", "--", "python", originals["script"]]]
    if kind == "plan_explain":
        return [["plan", "explain", path, "--all"], ["plan", "explain", path, "--json"]]
    if kind == "results":
        plots = [] if rng.random() < 0.85 else ["--out", tmp / "plots"]
        return [
            ["report", path, *(plots or ["--no-plots"])],
            ["report", path, "--rebuild", "--json", "--no-plots"],
        ]
    if kind == "models":
        return [
            ["mutate", "-l", "--models-config", path],
            ["mutate", "-ec", originals["settings"], "--dry-run", "--models-config", path],
            ["mutate", "-r", "toy", "-m", "m", "-mt", "all", "--dry-run", "--models-config", path],
        ]
    return [["mutate", "-ec", path, "--dry-run", "--json", *models]]


@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_fuzzed_input_is_success_or_one_line(
    capsys: pytest.CaptureFixture[str],
    originals: dict[str, Path],
    tmp_path: Path,
    kind: str,
    case: int,
) -> None:
    rng = random.Random(f"{SEED}-{kind}-{case}")
    original = originals["plan" if kind == "plan_explain" else kind]
    if kind == "results":  # the whole run folder, so --rebuild finds (or misses) the streams
        shutil.copytree(original.parent, tmp_path / "run")
        target = tmp_path / "run" / "results.json"
        if rng.random() < 0.3:
            csv = rng.choice(sorted((tmp_path / "run").glob("*.csv")))
            csv.write_bytes(mutate_bytes(rng, csv.read_bytes()))
    else:
        target = tmp_path / original.name
    data = mutated(rng, "plan" if kind == "plan_explain" else kind, original.read_bytes())
    target.write_bytes(data)
    for argv in commands(kind, target, originals, tmp_path / "out", rng):
        code, _out, err = run_cli(capsys, "-q", *argv)
        where = f"seed {SEED}, {kind} case {case}: codedag {' '.join(map(str, argv))}"
        assert "Traceback" not in err, f"{where}\n{err}"
        assert code in (0, 2), f"{where}: exit {code}\n{err}"
        assert "\x1b" not in _out + err, f"{where}: a raw escape reached the terminal"
        assert "codedag_fuzz_probe" not in sys.modules, f"{where}: a name in a file was imported"
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1, f"{where}: {len(lines)} lines on stderr\n{err}"
            assert lines[0].startswith(("codedag ", "codedag:")), f"{where}\n{err}"
