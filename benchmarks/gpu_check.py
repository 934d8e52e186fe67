"""One prepared check of codedag on a GPU machine, and its rehearsal on the CPU.

Runs, each step in its own process group under its own time limit, and all of them within one
overall budget: the CUDA tests, ``codedag doctor``, the image and audio demos, the placement,
batched, dispatch and loader benchmarks, the batched chains' run-time check end to end, a
steady batch eager against captured as a CUDA graph, the anatomy of single migrated calls, the
NVML energy counter against integrated power, one short ``codedag mutate`` run, the four
``codedag profile`` scenarios, JPEG decoding with nvJPEG against cv2 and the whole plan in a box
of 4 CPUs. A step that fails or runs out of time is reported and the rest still run. It writes three files into ``--out`` (default
``$OUT``, else ``gpu-check-out/``): ``summary.json`` (every step's status, time and figures),
``summary.md`` (the same for a person) and ``logs.tar.gz`` (each step's raw log and the files it
wrote, text only), and prints a short verdict.

Usage (``bin/gpu-check`` sets up the environment first)::

    python benchmarks/gpu_check.py [--device cuda|cpu] [--quick] [--budget-s 560] [--only a,b]
        [--tests FILE ...] [--jobs N]

The rehearsal (``--device cpu --quick``) may run ``--jobs`` steps at a time; on a GPU machine
steps measure and run one at a time.

Exit code: 0 when every step that ran passed, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
TEXT_SUFFIXES = {".log", ".json", ".md", ".csv", ".txt", ".xml", ".dot"}
MAX_ARCHIVED_BYTES = 4 * 2**20  # per file: the archive must come back (16 MiB per file)
MIN_STEP_S = 10.0  # a step gets at least this much of the budget, else it is skipped
KILL_GRACE_S = 5.0
# The order steps run in: what matters most first, in case the budget runs out.
ORDER = (
    "environment",
    "pytest-gpu",
    "doctor",
    "demo-image",
    "batched",
    "batched-check",
    "batched-capture",
    "placement",
    "profile",
    "nvml-energy",
    "migrate-overhead",
    "call-anatomy",
    "demo-audio",
    "mutate",
    "loader-tune",
    "nvjpeg-decode",
    "gpu-box",
)

Summarizer = Callable[[Path, str], dict[str, Any]]


@dataclass
class Step:
    """One command of the check: its own time limit; ``summarize`` reads what it wrote."""

    name: str
    argv: list[str]
    limit_s: float
    summarize: Summarizer | None = None
    stdout_file: str | None = None  # stdout kept apart from the log (a JSON document)
    skip_reason: str | None = None  # set when the machine cannot run it


@dataclass
class StepResult:
    """What one step did."""

    name: str
    status: str  # ok | failed | timeout | skipped
    seconds: float = 0.0
    limit_s: float = 0.0
    returncode: int | None = None
    reason: str = ""
    command: str = ""
    figures: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# running


def run_step(step: Step, work: Path, limit_s: float, env: dict[str, str]) -> StepResult:
    """Run one step in its own process group; kill the whole group when it outlives ``limit_s``."""
    log_path = work / f"{step.name}.log"
    result = StepResult(step.name, "ok", limit_s=round(limit_s, 1), command=_quote(step.argv))
    start = time.monotonic()
    with contextlib.ExitStack() as files:
        log = files.enter_context(open(log_path, "w", encoding="utf-8"))
        log.write(f"$ {result.command}\n")
        log.flush()
        stdout = log
        if step.stdout_file:
            stdout = files.enter_context(open(work / step.stdout_file, "w", encoding="utf-8"))
        try:
            proc = subprocess.Popen(
                step.argv,
                cwd=ROOT,
                env=env,
                stdout=stdout,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            result.status, result.reason = "failed", f"could not start: {exc}"
            return result
        try:
            result.returncode = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            result.status = "timeout"
            result.reason = f"still running after {limit_s:.0f} s: stopped"
        result.seconds = round(time.monotonic() - start, 1)
    if result.status == "ok" and result.returncode != 0:
        result.status, result.reason = "failed", f"exit code {result.returncode}"
    if step.summarize is not None:
        text = log_path.read_text(encoding="utf-8", errors="replace")
        try:
            result.figures = step.summarize(work, text)
        except Exception as exc:  # a summary must never lose the step's status
            result.figures = {"summary_error": f"{type(exc).__name__}: {exc}"}
    return result


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_steps(
    steps: list[Step],
    work: Path,
    budget_s: float,
    env: dict[str, str],
    echo: Callable[[str], None] = print,
    jobs: int = 1,
) -> list[StepResult]:
    """Run ``steps`` in order within ``budget_s`` overall; each gets ``min(limit, time left)``.

    ``jobs`` steps run at a time (results still in the steps' order): only for the CPU rehearsal,
    where nothing is measured; each of those steps gets a calibration folder of its own, so that
    none reads a calibration another is still writing.
    """
    deadline = time.monotonic() + budget_s

    def one(step: Step) -> StepResult:
        left = deadline - time.monotonic()
        if step.skip_reason:
            result = StepResult(step.name, "skipped", reason=step.skip_reason)
        elif left < MIN_STEP_S:
            result = StepResult(step.name, "skipped", reason="no time left in the budget")
        else:
            echo(f"[gpu-check] {step.name} (up to {min(step.limit_s, left):.0f} s) ...")
            step_env = env
            if jobs > 1:
                step_env = {**env, "CODEDAG_CACHE_DIR": str(work / "calibration" / step.name)}
            result = run_step(step, work, min(step.limit_s, left), step_env)
        echo(f"[gpu-check] {_line(result)}")
        return result

    if jobs == 1:
        return [one(step) for step in steps]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, steps))


def _quote(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


# ---------------------------------------------------------------------------------------------
# the steps


@dataclass(frozen=True)
class _Context:
    """What every step's command depends on: the Python, the device, the sizes, the work folder."""

    python: str
    device: str
    quick: bool
    work: Path

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def dev(self) -> str:
        return "cuda:0" if self.device == "cuda" else self.device

    @property
    def codedag(self) -> list[str]:
        return [self.python, "-m", "codedag"]

    @property
    def image(self) -> dict[str, int]:
        """Sizes where a GPU plausibly wins, or tiny ones for the rehearsal."""
        if self.quick:
            return {"batch": 4, "batches": 2, "rounds": 1, "size": 64}
        return {"batch": 32, "batches": 3, "rounds": 2, "size": 512}

    @property
    def image_flags(self) -> list[str]:
        """The image benchmarks' size flags."""
        image = self.image
        return [
            "--batch-size",
            str(image["batch"]),
            "--batches",
            str(image["batches"]),
            "--rounds",
            str(image["rounds"]),
            "--size",
            str(image["size"]),
        ]

    @property
    def rehearsal(self) -> bool:
        """The CPU rehearsal: it checks that every step runs and is read, and measures nothing."""
        return self.quick and not self.cuda

    @property
    def no_cuda(self) -> str | None:
        return None if self.cuda else "needs CUDA (rehearsal on the CPU)"

    @property
    def no_librosa(self) -> str | None:
        return None if _importable("librosa", self.python) else "librosa is not installed"


def _check_steps(c: _Context, tests: list[str] | None) -> list[Step]:
    """The environment, the CUDA tests and ``codedag doctor``."""
    gpu_tests = tests or sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if "mark.gpu" in p.read_text(encoding="utf-8", errors="replace")
    )
    return [
        Step(
            "environment",
            [c.python, str(BENCH / "gpu_check.py"), "--environment"],
            60,
            _summarize_json("environment.json"),
            stdout_file="environment.json",
        ),
        Step(
            "pytest-gpu",
            [
                c.python,
                "-m",
                "pytest",
                "-m",
                "gpu",
                "-q",
                "-p",
                "no:cacheprovider",
                "--continue-on-collection-errors",
                f"--junitxml={c.work / 'pytest-gpu.xml'}",
                *gpu_tests,
            ],
            90 if c.quick else 150,
            _summarize_pytest,
        ),
        Step(
            "doctor",
            [*c.codedag, "doctor", "--json"],
            60,
            _summarize_doctor,
            stdout_file="doctor.json",
        ),
    ]


def _demo_steps(c: _Context) -> list[Step]:
    """The image and audio demos on the device."""
    return [
        Step(
            "demo-image",
            [
                *c.codedag,
                "demo",
                "--device",
                c.dev,
                "--no-tune",
                "--batched",
                "always",
                "--batches",
                "2" if c.quick else "8",
                "--batch-size",
                "8" if c.quick else "64",
                "--out",
                str(c.work / "demo-image"),
                "--json",
            ],
            60 if c.quick else 120,
            _summarize_demo("demo-image"),
            stdout_file="demo-image.json",
        ),
        Step(
            "demo-audio",
            [
                *c.codedag,
                "demo",
                "--task",
                "audio",
                "--device",
                c.dev,
                "--no-tune",
                "--batches",
                "2" if c.quick else "6",
                "--batch-size",
                "4" if c.quick else "16",
                "--out",
                str(c.work / "demo-audio"),
                "--json",
            ],
            60 if c.quick else 90,
            _summarize_demo("demo-audio"),
            stdout_file="demo-audio.json",
            skip_reason=c.no_librosa,
        ),
    ]


def _benchmark_steps(c: _Context) -> list[Step]:
    """The batched and placement benchmarks."""
    return [
        Step(
            "batched",
            [
                c.python,
                str(BENCH / "batched.py"),
                "--device",
                c.dev,
                "--pipelines",
                *(["demo_image"] if c.quick else ["letterbox", "demo_image"]),
                "--workers",
                "0",
                *c.image_flags,
                "--json",
                str(c.work / "batched.json"),
            ],
            60 if c.quick else 150,
            _summarize_rows("batched.json"),
        ),
        Step(
            "batched-check",
            [
                c.python,
                str(BENCH / "batched_check.py"),
                "--device",
                c.dev,
                "--pipelines",
                # on a GPU the letterbox chain is the one calibration runs batched (demo_image's
                # stays per sample: nothing to check)
                "letterbox" if c.cuda else "demo_image",
                "--workers",
                "0",
                "--batch-size",
                str(c.image["batch"]),
                "--batches",
                "40" if c.quick else "24",
                "--rounds",
                "1",
                "--size",
                str(c.image["size"]),
                # the CPU keeps image chains per sample: run them as if chosen, to check them
                *(["--chosen"] if c.quick else []),
                "--json",
                str(c.work / "batched-check.json"),
            ],
            60 if c.quick else 120,
            _summarize_rows("batched-check.json"),
        ),
        Step(
            "batched-capture",
            [
                c.python,
                str(BENCH / "batched_capture.py"),
                "--device",
                c.dev,
                "--pipelines",
                "demo_image",
                "letterbox",
                "--batch-size",
                str(c.image["batch"]),
                "--batches",
                "2" if c.quick else "4",
                "--rounds",
                "1" if c.quick else "3",
                "--repeats",
                "2" if c.quick else "10",
                "--size",
                str(c.image["size"]),
                "--json",
                str(c.work / "batched-capture.json"),
            ],
            60 if c.quick else 90,
            _summarize_rows("batched-capture.json"),
        ),
        Step(
            "placement",
            [
                c.python,
                str(BENCH / "placement.py"),
                "--device",
                c.dev,
                "--pipelines",
                *(["demo_image"] if c.quick else ["letterbox", "demo_image"]),
                "--workers",
                "0" if c.quick else "2",
                *c.image_flags,
                "--json",
                str(c.work / "placement.json"),
            ],
            60 if c.quick else 90,
            _summarize_rows("placement.json"),
        ),
    ]


def _dispatch_and_loader_steps(c: _Context) -> list[Step]:
    """The dispatch and call-anatomy benchmarks and the loader tuning."""
    return [
        Step(
            "migrate-overhead",
            [
                c.python,
                str(BENCH / "migrate_overhead.py"),
                "--loops",
                "500" if c.quick else "3000",
                "--repeats",
                "3" if c.quick else "7",
                "--json",
            ],
            60,
            _summarize_json("migrate-overhead.json"),
            stdout_file="migrate-overhead.json",
        ),
        Step(
            "call-anatomy",
            [
                c.python,
                str(BENCH / "call_anatomy.py"),
                "--device",
                c.dev,
                "--calls",
                "3" if c.quick else "20",
                "--size",
                str(c.image["size"]),
                "--json",
                str(c.work / "call-anatomy.json"),
            ],
            30,
            _summarize_rows("call-anatomy.json"),
        ),
        Step(
            "loader-tune",
            [
                c.python,
                str(BENCH / "loader_tune.py"),
                "--pipelines",
                "demo",
                "--batch-size",
                "8" if c.quick else "32",
                "--batches",
                "3" if c.quick else "6",
                "--rounds",
                "1" if c.quick else "2",
                "--json",
                str(c.work / "loader-tune.json"),
                "--log-trials",
            ],
            60,
            _summarize_rows("loader-tune.json"),
        ),
    ]


def _box_steps(c: _Context) -> list[Step]:
    """JPEG decoding on the device against cv2, and the whole plan in a box of 4 CPUs (quick
    sizes on the device too: one run of each pipeline, the own loader at 0 and 2 workers)."""
    return [
        Step(
            "nvjpeg-decode",
            [
                c.python,
                str(BENCH / "nvjpeg_decode.py"),
                "--device",
                c.dev,
                "--samples",
                "16" if c.quick else "128",
                "--repeats",
                "1" if c.quick else "3",
                "--out",
                str(c.work / "nvjpeg-decode.json"),
            ],
            60,
            _summarize_rows("nvjpeg-decode.json"),
        ),
        Step(
            "gpu-box",
            [
                c.python,
                str(BENCH / "gpu_box.py"),
                "--device",
                c.dev,
                "--quick",
                "--cpus",
                "4",
                "--samples",
                "16" if c.quick else "64",
                "--batch-size",
                "8" if c.quick else "16",
                # the rehearsal: one image and one audio pipeline (the rest run in the whole-plan
                # benchmark's tests); on the device the image pipelines (audio: the demo-audio step)
                "--pipelines",
                *(
                    ["demo_image", "audio_files"]
                    if c.rehearsal
                    else ["letterbox", "demo_image", "yolo_mosaic"]
                ),
                "--out",
                str(c.work / "gpu-box.json"),
            ],
            300 if c.quick else 180,
            _summarize_rows("gpu-box.json"),
        ),
    ]


def _meter_steps(c: _Context) -> list[Step]:
    """The profiler scenarios, the NVML energy counter and one short ``codedag mutate``."""
    return [
        Step(
            "profile",
            [
                *c.codedag,
                "profile",
                "--scenario",
                "all",
                "--device",
                "cuda" if c.cuda else "cpu",
                "--batch_size",
                "8" if c.quick else "64",
                "--image_size",
                "32" if c.quick else "224",
                "--dataset_size",
                "64" if c.quick else "1024",
                "--warmup_steps",
                "2" if c.quick else "5",
                "--profile_steps",
                "2" if c.quick else "5",
                "--cpu_threads",
                "1" if c.quick else "4",
                "--trace_dir",
                str(c.work / "profile-traces"),
                "--output_json",
                str(c.work / "profile.json"),
            ],
            60 if c.quick else 120,
            _summarize_profile,
        ),
        Step(
            "nvml-energy",
            [c.python, str(BENCH / "nvml_counter_vs_power.py"), "--seconds", "15"],
            45,
            _summarize_nvml,
            skip_reason=c.no_cuda,
        ),
        Step(
            "mutate",
            [
                *c.codedag,
                "mutate",
                "-r",
                "examples",
                "-m",
                "mnist_cnn",
                "-mt",
                "learning_rate",
                "-n",
                "1",
                "-s",
                "1",
                "--cooldown",
                "0",
                "--results-dir",
                str(c.work / "mutate"),
                "--no-echo",
                "--json",
            ],
            60 if c.quick else 90,
            _summarize_json("mutate.json"),
            stdout_file="mutate.json",
        ),
    ]


def steps_for(
    device: str,
    quick: bool,
    work: Path,
    tests: list[str] | None = None,
    python: str = sys.executable,
) -> list[Step]:
    """The check's steps for ``device`` (``cuda`` or ``cpu``); ``quick`` uses tiny sizes;
    ``tests`` replaces the test files of ``pytest-gpu``."""
    c = _Context(python, device, quick, work)
    steps = [
        *_check_steps(c, tests),
        *_demo_steps(c),
        *_benchmark_steps(c),
        *_dispatch_and_loader_steps(c),
        *_meter_steps(c),
        *_box_steps(c),
    ]
    return sorted(steps, key=lambda step: ORDER.index(step.name))


def _importable(module: str, python: str) -> bool:
    probe = subprocess.run(
        [python, "-c", f"import {module}"], capture_output=True, check=False, timeout=120
    )
    return probe.returncode == 0


DISTRIBUTIONS = {"pynvml": "nvidia-ml-py"}
"""Modules without ``__version__``: the distribution that carries them."""


def _version(module: str) -> str:
    imported = __import__(module)
    if module in DISTRIBUTIONS:
        return importlib.metadata.version(DISTRIBUTIONS[module])
    return str(imported.__version__)


def environment() -> dict[str, Any]:
    """Versions and the device as this Python sees them (the ``environment`` step's output)."""
    facts: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    modules = ("torch", "torchvision", "numpy", "cv2", "PIL", "librosa", "pydantic", "rustworkx")
    for module in (*modules, "pynvml"):
        try:
            facts[module] = _version(module)
        except Exception as exc:
            facts[module] = f"unavailable: {type(exc).__name__}: {exc}"
    try:
        import torch

        facts["torch_cuda"] = torch.version.cuda
        facts["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            facts["gpu"] = props.name
            facts["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
            facts["gpu_capability"] = f"{props.major}.{props.minor}"
    except Exception as exc:
        facts["torch_error"] = f"{type(exc).__name__}: {exc}"
    try:
        import pynvml

        pynvml.nvmlInit()
        facts["driver"] = pynvml.nvmlSystemGetDriverVersion()
        pynvml.nvmlShutdown()
    except Exception as exc:
        facts["driver"] = f"unavailable: {type(exc).__name__}"
    return facts


# ---------------------------------------------------------------------------------------------
# figures from what each step wrote


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _summarize_json(name: str) -> Summarizer:
    def summarize(work: Path, _log: str) -> dict[str, Any]:
        data = _load(work / name)
        return data if isinstance(data, dict) else {"items": data}

    return summarize


def _summarize_rows(name: str) -> Summarizer:
    def summarize(work: Path, _log: str) -> dict[str, Any]:
        data = _load(work / name)
        return data if isinstance(data, dict) else {"rows": data}

    return summarize


def _summarize_pytest(work: Path, log: str) -> dict[str, Any]:
    import xml.etree.ElementTree as ET

    figures: dict[str, Any] = {"result_line": _last_line_with(log, (" passed", " failed", "error"))}
    xml_path = work / "pytest-gpu.xml"
    if not xml_path.exists():
        return figures
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed = []
    for suite in ET.parse(xml_path).getroot().iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        for tag in ("failure", "error"):
            problem = case.find(tag)
            if problem is not None:
                message = (problem.get("message") or "").splitlines()[:1]
                failed.append(f"{case.get('classname')}::{case.get('name')}: {' '.join(message)}")
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    figures.update(counts)
    figures["failed"] = failed
    return figures


def _summarize_doctor(work: Path, _log: str) -> dict[str, Any]:
    data = _load(work / "doctor.json")
    keep = ("torch", "cuda", "gpus", "cpu", "cgroup", "energy", "nvml", "governor")
    return {k: v for k, v in data.items() if any(word in k for word in keep)} or data


def _summarize_demo(folder: str) -> Summarizer:
    def summarize(work: Path, _log: str) -> dict[str, Any]:
        data = _load(work / folder / "demo_summary.json")
        batched = data.get("batched") or {}
        stats = batched.get("stats") or {}
        return {
            "device": data.get("device"),
            "modes": {
                m["mode"]: {
                    k: m.get(k) for k in ("mean_step_s", "p50_batch_s", "throughput_samples_s")
                }
                for m in data.get("modes", [])
            },
            "speedup": data.get("speedup"),
            "equivalence": data.get("equivalence"),
            "placement": [
                {
                    k: p.get(k)
                    for k in ("function", "calls", "placed", "library_ns", "torch_ns", "speedup")
                }
                for p in data.get("placement", [])
            ],
            "guard": data.get("guard"),
            "migrated_calls": data.get("migrated_calls"),
            "fallbacks": data.get("fallbacks"),
            "batched": {
                k: stats.get(k)
                for k in (
                    "batches",
                    "samples",
                    "groups",
                    "backend_calls",
                    "h2d_bytes",
                    "d2h_bytes",
                    "forced",
                    "worker_ms",
                    "main_ms",
                    "verify",
                )
            },
            "epochs": [
                {k: e.get(k) for k in ("mode", "epoch", "samples_per_s", "data_wait_share")}
                for e in data.get("epochs", [])
            ],
            "cache": {
                k: ((data.get("cache") or {}).get("stats") or {}).get(k)
                for k in ("hits", "misses", "stored", "evictions")
            },
            "verdict": data.get("verdict"),
        }

    return summarize


def _summarize_profile(work: Path, _log: str) -> dict[str, Any]:
    runs = _load(work / "profile.json").get("runs", [])
    return {
        run.get("scenario", f"run{i}"): {
            "diagnosis": (run.get("diagnosis") or {}).get("verdict"),
            "p50_step_ms": _ms(run.get("p50_step_time_s")),
            "p50_data_wait_ms": _ms(run.get("p50_dataloader_wait_s")),
        }
        for i, run in enumerate(runs)
    }


def _ms(seconds: Any) -> float | None:
    return None if seconds is None else round(float(seconds) * 1e3, 3)


def _summarize_nvml(_work: Path, log: str) -> dict[str, Any]:
    rows = {}
    for line in log.splitlines():
        parts = line.rsplit(None, 2)
        if len(parts) == 3:
            try:
                rows[parts[0].strip()] = {"joules": float(parts[1]), "vs_counter": float(parts[2])}
            except ValueError:
                continue
    return {"rows": rows}


def _last_line_with(text: str, words: tuple[str, ...]) -> str:
    for line in reversed(text.splitlines()):
        if not line.startswith("$ ") and any(w in line for w in words):
            return line.strip("= ").strip()
    return ""


# ---------------------------------------------------------------------------------------------
# outputs


def _line(result: StepResult) -> str:
    text = f"{result.name:<17} {result.status:<8} {result.seconds:>6.1f} s"
    return f"{text}  {result.reason}" if result.reason else text


def write_outputs(
    results: list[StepResult], work: Path, out: Path, meta: dict[str, Any]
) -> list[Path]:
    """summary.json, summary.md and logs.tar.gz into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    summary = {**meta, "verdict": verdict(results), "steps": [asdict(r) for r in results]}
    summary_json = out / "summary.json"
    summary_json.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    summary_md = out / "summary.md"
    summary_md.write_text(markdown(results, meta), encoding="utf-8")
    archive = out / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            small = path.is_file() and path.stat().st_size <= MAX_ARCHIVED_BYTES
            if small and path.suffix in TEXT_SUFFIXES:
                tar.add(path, arcname=str(path.relative_to(work)))
    return [summary_json, summary_md, archive]


def verdict(results: list[StepResult]) -> str:
    """One sentence: how many steps ran and passed, and which did not."""
    ran = [r for r in results if r.status != "skipped"]
    bad = [f"{r.name} ({r.status})" for r in ran if r.status != "ok"]
    skipped = [r.name for r in results if r.status == "skipped"]
    text = f"{len(ran) - len(bad)} of {len(ran)} steps passed"
    if bad:
        text += "; not passed: " + ", ".join(bad)
    if skipped:
        text += "; skipped: " + ", ".join(skipped)
    return text


def markdown(results: list[StepResult], meta: dict[str, Any]) -> str:
    """The summary for a person: one table of steps, then each step's figures."""
    lines = [f"# gpu-check on {meta.get('device')} ({meta.get('date')})", ""]
    lines += [f"**{verdict(results)}**", "", "| step | status | s | limit s | note |"]
    lines += ["|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.name} | {r.status} | {r.seconds} | {r.limit_s} | {r.reason} |")
    for r in results:
        if r.figures or r.command:
            lines += ["", f"## {r.name}", "", f"`{r.command}`" if r.command else "", ""]
            lines += ["```json", json.dumps(r.figures, indent=1, default=str)[:6000], "```"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the rehearsal)")
    parser.add_argument(
        "--budget-s", type=float, default=None, help="overall limit in s (560; quick 600)"
    )
    parser.add_argument("--only", default="", help="comma-separated step names to run")
    parser.add_argument(
        "--tests",
        nargs="+",
        default=None,
        help="test files for pytest-gpu (default: every file with a gpu mark)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="steps run at a time, only with --device cpu (the rehearsal measures nothing)",
    )
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-check-out")
    parser.add_argument("--keep", action="store_true", help="keep the work folder and say where")
    parser.add_argument("--environment", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.environment:
        print(json.dumps(environment(), indent=2))
        return 0
    if args.device not in ("cuda", "cpu") and not args.device.startswith("cuda:"):
        parser.error(f"--device must be cuda, cuda:N or cpu, got {args.device!r}")
    if args.jobs < 1 or (args.jobs > 1 and args.device != "cpu"):
        parser.error(f"--jobs must be 1, or more with --device cpu only, got {args.jobs}")
    budget_s = args.budget_s or (600.0 if args.quick else 560.0)
    if not 0 < budget_s <= 3600:
        parser.error(f"--budget-s must be in (0, 3600], got {budget_s}")
    work = Path(tempfile.mkdtemp(prefix="codedag-gpu-check-"))
    steps = steps_for(args.device, args.quick, work, args.tests)
    wanted = [n for n in args.only.split(",") if n]
    unknown = sorted(set(wanted) - {s.name for s in steps})
    if unknown:
        parser.error(f"unknown steps {unknown}; steps: {', '.join(s.name for s in steps)}")
    if wanted:
        steps = [s for s in steps if s.name in wanted]
    env = {
        **os.environ,
        "CI": "true",
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
        "CODEDAG_CACHE_DIR": str(work / "calibration-cache"),
    }
    started = time.monotonic()
    results = run_steps(steps, work, budget_s, env, jobs=args.jobs)
    meta = {
        "device": args.device,
        "quick": args.quick,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(),
        "budget_s": budget_s,
        "seconds": round(time.monotonic() - started, 1),
    }
    files = write_outputs(results, work, Path(args.out), meta)
    print(f"[gpu-check] wrote {', '.join(str(f) for f in files)}")
    print(f"[gpu-check] verdict: {verdict(results)} in {meta['seconds']:.0f} s")
    if args.keep:
        print(f"[gpu-check] work folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.status in ("ok", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
