"""Toy training scripts (stdlib only, fast) and a models config that runs them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

SCRIPTS = {
    # Prints a metric that depends on --lr; sleeps --epochs * 0.01 s.
    "ok": """
        import argparse, time
        p = argparse.ArgumentParser()
        p.add_argument("--epochs", type=int, default=1)
        p.add_argument("--lr", type=float, default=0.1)
        a = p.parse_args()
        time.sleep(a.epochs * 0.01)
        print(f"Test Accuracy: {50 + 100 * a.lr:.2f}%")
        print("Training complete")
    """,
    # Fails on its first run (per folder), succeeds afterwards.
    "flaky": """
        import pathlib, sys
        marker = pathlib.Path(__file__).with_suffix(".ran")
        if not marker.exists():
            marker.write_text("1")
            print("RuntimeError: simulated failure")
            sys.exit(3)
        print("Test Accuracy: 90.00%")
        print("Training complete")
    """,
    # Exits 0 but prints an error pattern.
    "liar": """
        print("Traceback (most recent call last):")
        print("Training complete")
    """,
    # Starts a grandchild and sleeps --epochs seconds (0: quick success).
    "sleepy": """
        import argparse, subprocess, sys, time
        p = argparse.ArgumentParser()
        p.add_argument("--epochs", type=int, default=0)
        p.add_argument("--lr", type=float, default=0.1)
        a = p.parse_args()
        if a.epochs:
            c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            print("child", c.pid, flush=True)
            open(__file__.replace("sleepy.py", "bg.started"), "w").close()
            time.sleep(a.epochs)
        print("Test Accuracy: 50.00%")
        print("Training complete")
    """,
    # Waits (at most 20 s) until sleepy.py has started its child, then succeeds.
    "waiter": """
        import os, time
        marker = __file__.replace("waiter.py", "bg.started")
        deadline = time.monotonic() + 20
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        print("Test Accuracy: 70.00%" if os.path.exists(marker) else "no background")
        print("Training complete")
    """,
    # Prints the GPU it was given.
    "pinned": """
        import os, time
        time.sleep(0.2)
        print("visible", os.environ.get("CUDA_VISIBLE_DEVICES"))
        print("Test Accuracy: 10.00%")
        print("Training complete")
    """,
}


def toy_config(tmp_path: Path, timeout_s: float | None = None) -> Path:
    repo = tmp_path / "toy"
    repo.mkdir(exist_ok=True)
    for name, code in SCRIPTS.items():
        (repo / f"{name}.py").write_text(textwrap.dedent(code))
    config = {
        "repositories": {
            "toy": {
                "path": "toy",
                "train_script": "ok.py",
                "models": {name: {"train_script": f"{name}.py"} for name in SCRIPTS},
                "supported_hyperparams": {
                    "epochs": {"flag": "--epochs", "type": "int", "default": 0, "range": [0, 3]},
                    "learning_rate": {
                        "flag": "--lr",
                        "type": "float",
                        "default": 0.1,
                        "distribution": "log_uniform",
                    },
                },
                "performance_metrics": {"log_patterns": {"accuracy": "Test Accuracy: ([0-9.]+)%"}},
                "success_patterns": ["Training complete"],
                "error_patterns": ["Traceback \\(most recent"],
                **({"timeout_s": timeout_s} if timeout_s else {}),
            }
        }
    }
    path = tmp_path / "models.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return toy_config(tmp_path)
