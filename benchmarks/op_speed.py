"""Op speed of every backend family in one run: cv2, then NumPy, PIL and librosa.

Runs, in this one process and one after the other, the two op-speed benchmarks of the backend
modules: ``op_speed_cv2.py`` (cv2 one image at a time vs the backend on a batch, torch CPU and
CUDA) and ``op_speed_numpy_audio.py`` (NumPy, PIL and librosa, with a CUDA column that includes
the host-to-device and device-to-host copies). Each prints its own table of library time vs
backend time and their ratio (> 1: the backend is faster). CPU thread counts are pinned (default
1 for torch and cv2) so that the library and the backend each use one core: on a machine shared
with other work, more threads than free cores make OpenMP spin and distort torch's times.

Usage::

    python benchmarks/op_speed.py              # 224 and 512 images, batches of 1 and 64
    python benchmarks/op_speed.py --quick      # 224 images only, shorter measurements
    python benchmarks/op_speed.py --only cv2   # one family: cv2 or numpy_audio
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
SECTIONS = ("cv2", "numpy_audio")


def _load(section: str) -> ModuleType | None:
    path = HERE / f"op_speed_{section}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"op_speed_{section}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def _argv(section: str, quick: bool, json_prefix: str | None) -> list[str]:
    argv = [f"op_speed_{section}.py"]
    if section == "cv2":
        argv += ["--sizes", "224"] if quick else ["--sizes", "224", "512"]
        argv += ["--batches", "1", "64"]
        if quick:
            argv += ["--budget-s", "0.2"]
    elif quick:
        argv.append("--quick")
    if json_prefix:
        argv += ["--json", f"{json_prefix}_{section}.json"]
    return argv


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="224x224 only, shorter runs")
    parser.add_argument("--only", choices=SECTIONS, help="run one family only")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch and cv2")
    parser.add_argument("--json", metavar="PREFIX", help="write PREFIX_<family>.json per family")
    args = parser.parse_args()

    import cv2
    import torch

    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    saved = sys.argv
    try:
        for section in SECTIONS:
            if args.only and section != args.only:
                continue
            module = _load(section)
            print(f"\n=== {section} ===")
            if module is None:
                print(f"unavailable: benchmarks/op_speed_{section}.py is not in this checkout")
                continue
            sys.argv = _argv(section, args.quick, args.json)
            module.main()
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
