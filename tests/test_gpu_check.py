"""bin/gpu-check's plumbing: steps under their own limits within one budget, failures reported
while the rest run, the three output files; and the whole CPU rehearsal."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gpu_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks/gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie stays until its new parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_steps_run_in_order_each_within_its_limit(tmp_path: Path) -> None:
    gc = _gpu_check()
    pid_file = tmp_path / "grandchild.pid"
    hang = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen(['sleep', '120'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(120)\n"
    )
    written = tmp_path / "work" / "figures.json"
    steps = [
        gc.Step(
            "writes",
            _python(f"open({str(written)!r}, 'w').write('{{\"x\": 1}}')"),
            30,
            lambda work, log: json.loads((work / "figures.json").read_text()),
        ),
        gc.Step("fails", _python("import sys; print('boom'); sys.exit(3)"), 30),
        gc.Step("hangs", _python(hang), 3),
        gc.Step("not here", _python("pass"), 30, skip_reason="needs CUDA"),
        gc.Step("broken summary", _python("pass"), 30, lambda work, log: 1 / 0),
        gc.Step("after", _python("print('still ran')"), 30),
    ]
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    results = gc.run_steps(steps, work, budget_s=120, env=dict(os.environ), echo=lambda _: None)
    elapsed = time.monotonic() - started
    status = {r.name: r.status for r in results}
    assert status == {
        "writes": "ok",
        "fails": "failed",
        "hangs": "timeout",
        "not here": "skipped",
        "broken summary": "ok",
        "after": "ok",
    }
    by_name = {r.name: r for r in results}
    assert by_name["writes"].figures == {"x": 1}
    assert by_name["fails"].returncode == 3 and "exit code 3" in by_name["fails"].reason
    assert by_name["hangs"].seconds < 3 + 2 * gc.KILL_GRACE_S
    assert "ZeroDivisionError" in by_name["broken summary"].figures["summary_error"]
    assert elapsed < 60
    time.sleep(0.2)
    assert not _running(int(pid_file.read_text())), "the whole process group is stopped"
    assert "boom" in (work / "fails.log").read_text()

    out = tmp_path / "out"
    files = gc.write_outputs(results, work, out, {"device": "cpu", "date": "today"})
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar.gz", "summary.json", "summary.md"]
    assert len(files) <= 8
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"].startswith("3 of 5 steps passed; not passed: fails (failed), hangs")
    assert "skipped: not here" in summary["verdict"]
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"writes.log", "fails.log", "hangs.log", "after.log", "figures.json"} <= names
    assert "| hangs | timeout |" in (out / "summary.md").read_text()


def test_a_spent_budget_skips_the_remaining_steps(tmp_path: Path) -> None:
    gc = _gpu_check()
    gc.MIN_STEP_S = 0.5
    steps = [
        gc.Step("slow", _python("import time; time.sleep(30)"), 60),
        gc.Step("late", _python("pass"), 60),
    ]
    results = gc.run_steps(
        steps, tmp_path, budget_s=gc.MIN_STEP_S + 1, env=dict(os.environ), echo=lambda _: None
    )
    assert [r.status for r in results] == ["timeout", "skipped"]
    assert results[0].seconds < gc.MIN_STEP_S + 1 + 2 * gc.KILL_GRACE_S
    assert results[1].reason == "no time left in the budget"


def test_jobs_run_steps_together_each_with_its_own_calibrations(tmp_path: Path) -> None:
    """Each step waits for the other's file: one at a time, both would run out of time."""
    gc = _gpu_check()

    def meets(mine: str, other: str) -> list[str]:
        return _python(
            "import os, pathlib, time\n"
            f"pathlib.Path({str(tmp_path / mine)!r}).write_text(os.environ['CODEDAG_CACHE_DIR'])\n"
            f"while not pathlib.Path({str(tmp_path / other)!r}).exists(): time.sleep(0.05)\n"
        )

    steps = [
        gc.Step("a", meets("a.mark", "b.mark"), 60),
        gc.Step("b", meets("b.mark", "a.mark"), 60),
    ]
    results = gc.run_steps(
        steps, tmp_path, budget_s=120, env=dict(os.environ), echo=lambda _: None, jobs=2
    )
    assert [(r.name, r.status) for r in results] == [("a", "ok"), ("b", "ok")]
    folders = {(tmp_path / f"{n}.mark").read_text() for n in "ab"}
    assert folders == {str(tmp_path / "calibration" / n) for n in "ab"}


def test_every_step_of_the_gpu_run_has_a_place_in_the_order(tmp_path: Path) -> None:
    gc = _gpu_check()
    names = [s.name for s in gc.steps_for("cuda", quick=False, work=tmp_path)]
    assert names == list(gc.ORDER)
    assert all(
        s.skip_reason is None
        for s in gc.steps_for("cuda", False, tmp_path)
        if s.name != "demo-audio"
    )
    cpu = {s.name: s for s in gc.steps_for("cpu", quick=True, work=tmp_path)}
    assert cpu["nvml-energy"].skip_reason is not None
    # the rehearsal boxes an image and the audio pipeline; the device the three image pipelines
    box = cpu["gpu-box"].argv
    assert box[box.index("--pipelines") + 1 :][:2] == ["demo_image", "audio_files"]
    cuda = {s.name: s for s in gc.steps_for("cuda", quick=False, work=tmp_path)}
    box = cuda["gpu-box"].argv
    assert box[box.index("--pipelines") + 1 :][:4] == [
        "letterbox",
        "demo_image",
        "yolo_mosaic",
        "--out",
    ]
    # on the device the batched check runs the chain that calibration chooses to batch there
    check = cuda["batched-check"].argv
    assert check[check.index("--pipelines") + 1] == "letterbox"


def test_tests_option_replaces_the_gpu_test_files(tmp_path: Path) -> None:
    gc = _gpu_check()
    chosen = ["tests/profile/test_profile_cuda.py"]
    steps = {s.name: s for s in gc.steps_for("cuda", False, tmp_path, tests=chosen)}
    assert steps["pytest-gpu"].argv[-1:] == chosen
    every = {s.name: s for s in gc.steps_for("cuda", False, tmp_path)}
    assert "tests/profile/test_profile_cuda.py" in every["pytest-gpu"].argv
    assert len(every["pytest-gpu"].argv) > len(steps["pytest-gpu"].argv)


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    gc = _gpu_check()
    with pytest.raises(SystemExit) as exc:
        gc.main(["--only", "nonsense", "--out", str(tmp_path)])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:  # steps on a GPU machine measure: one at a time
        gc.main(["--device", "cuda", "--jobs", "2", "--out", str(tmp_path)])
    assert exc.value.code == 2


@pytest.mark.slow
def test_the_cpu_rehearsal_passes(tmp_path: Path) -> None:
    """The same steps as on a GPU machine, on the CPU with tiny sizes, two at a time (about
    100 s on a quiet 2-core machine; the budget is raised so that a busy one does not fail it)."""
    command = [str(ROOT / "bin/gpu-check"), "--device", "cpu", "--quick", "--budget-s", "900"]
    # the CUDA tests only skip on the CPU: one file of them shows the step runs and is read
    command += ["--jobs", "2", "--tests", "tests/migrate/batched/test_batched_deliver.py"]
    proc = subprocess.run(
        [*command, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1000,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    status = {s["name"]: s["status"] for s in summary["steps"]}
    assert status.pop("nvml-energy") == "skipped"
    assert set(status.values()) == {"ok"}, status
    figures = {s["name"]: s["figures"] for s in summary["steps"]}
    assert figures["demo-image"]["equivalence"]["passed"] is True
    assert figures["pytest-gpu"]["tests"] > 0
    assert set(figures["profile"]) == {"dataloader", "sync", "tiny_ops", "memory_churn"}
    box = figures["gpu-box"]
    assert {r["pipeline"] for r in box["rows"]} | set(box["skipped"]) == {
        "demo_image",
        "audio_files",
    }
    assert all(r["same"] in ("bit", "tol") for r in box["rows"]), box["rows"]
    assert [r["pipeline"] for r in figures["nvjpeg-decode"]["rows"]] == ["letterbox", "demo_image"]
    anatomy = {r["call"]: r for r in figures["call-anatomy"]["rows"]}
    assert "cv2.warpAffine" in anatomy and anatomy["cv2.warpAffine"]["floor_us"] > 0
    assert "verdict:" in proc.stdout
