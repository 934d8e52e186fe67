"""Training scripts written into a test's folder, run by ``codedag run`` and by plain Python.

:func:`write_train_script` writes a Kaggle-style script: PNG files on disk (``cv2.imwrite``, 192x168
noise that takes about 0.15 ms to decode, so caching the resized prefix pays several times over
however busy the machine is: with much smaller images a plan may rightly change nothing), a
Dataset decoding them with cv2 with a resize and a random flip, a shuffled DataLoader built inline,
a tiny torch model, and per-epoch losses printed with full precision, so two runs print the same
text exactly when they receive the same batches.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TRAIN = """\
import glob, os, sys
import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")
EPOCHS = int(os.environ.get("EPOCHS", "3"))


def write_images(n=16):
    if os.path.isdir(ROOT):
        return
    os.makedirs(ROOT)
    rng = np.random.default_rng(0)
    for i in range(n):
        cv2.imwrite(os.path.join(ROOT, f"{{i:03d}}.png"), rng.integers(0, 255, (192, 168, 3), dtype=np.uint8))


class ImageFiles(Dataset):
    def __init__(self, files):
        self.files = files
{extra_methods}
    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
{guard}        img = cv2.imread(self.files[i])
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        img = cv2.resize(img, (16, 16))
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        x = torch.from_numpy(img.astype(np.float32) / 255.0).permute(2, 0, 1)
        return x, i % 2


def main():
    write_images()
    torch.manual_seed(0)
    np.random.seed(0)
    files = sorted(glob.glob(os.path.join(ROOT, "*.png")))
    data = ImageFiles(files)
    train = DataLoader(data, batch_size=4, shuffle=True{loader_options})
    valid = DataLoader(ImageFiles(files[:8]), batch_size=4)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(EPOCHS):
{epoch_start}        total = 0.0
        for x, y in train:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {{epoch}} loss {{total!r}}", flush=True)
{validation}{ending}

if __name__ == "__main__":
    main()
"""

VALIDATION = """\
        with torch.no_grad():
            val = sum(torch.nn.functional.cross_entropy(model(x), y).item() for x, y in valid)
        print(f"epoch {epoch} val {val!r}", flush=True)
"""

# A dataset that refuses a second read of an index within one epoch: the script reads each
# index once, and so must codedag's tracing and storing (they read copies).
ONCE_PER_EPOCH_METHODS = """\
        self.seen = set()

    def new_epoch(self):
        self.seen = set()
"""
ONCE_PER_EPOCH_GUARD = """\
        if i in self.seen:
            raise RuntimeError(f"index {i} read twice in one epoch")
        self.seen.add(i)
"""
# A dataset that reads in the object that made it only (its copies refuse): tracing, which reads
# a copy where it can, reads the data set itself.
ORIGINAL_ONLY_METHODS = """\
        self.original = True

    def __getstate__(self):
        return {**self.__dict__, "original": False}
"""
ORIGINAL_ONLY_GUARD = """\
        if not self.original:
            raise RuntimeError("a copy of this data set reads nothing")
"""


def write_train_script(
    folder: Path,
    name: str = "train.py",
    *,
    validation: bool = False,
    ending: str = "",
    read_once: bool = False,
    original_only: bool = False,
    loader_options: str = "",
) -> Path:
    """Write the training script (and nothing else: it writes its images on first run);
    ``loader_options``: more arguments of its training DataLoader (``num_workers=2``);
    ``read_once``: its data set refuses a second read of an index in one epoch;
    ``original_only``: its data set's copies refuse to read."""
    methods = ONCE_PER_EPOCH_METHODS if read_once else ""
    methods += ORIGINAL_ONLY_METHODS if original_only else ""
    guard = ONCE_PER_EPOCH_GUARD if read_once else ""
    guard += ORIGINAL_ONLY_GUARD if original_only else ""
    text = TRAIN.format(
        loader_options=f", {loader_options}" if loader_options else "",
        extra_methods=methods,
        guard=guard,
        epoch_start="        data.new_epoch()\n" if read_once else "",
        validation=VALIDATION if validation else "",
        ending=f"    {ending}\n" if ending else "",
    )
    path = folder / name
    path.write_text(text)
    return path


def run_python(
    args: list[str], cwd: Path, timeout_s: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd`` with this interpreter and environment (``env``: more)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONHASHSEED": "0", **(env or {})},
    )


def codedag_run(
    options: list[str], command: list[str], cwd: Path, timeout_s: float = 180
) -> subprocess.CompletedProcess[str]:
    """``python -m codedag run OPTIONS -- python COMMAND`` in ``cwd``, with a prefix cache of
    its own there (what another test's run stored or judged, such as a chain found not to pay
    on a loaded machine, never reaches it; two runs in one folder share it)."""
    argv = ["-m", "codedag", "run", *options, "--", "python", *command]
    return run_python(argv, cwd, timeout_s, {"CODEDAG_PREFIX_CACHE_DIR": str(cwd / "prefix-cache")})
