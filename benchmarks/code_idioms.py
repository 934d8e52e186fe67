"""``codedag run`` on data sets written in the idioms projects use, side by side with plain Python.

Each idiom is a training script written into a temporary folder, over files written there once
(PNG images, 16-bit PNG scans, WAV clips), run as ``python train.py`` and as ``python -m codedag
run --replan -- python train.py`` (a fresh prefix cache each time):

* ``partial``: a Compose of ``functools.partial(cv2.cvtColor, ...)``,
  ``functools.partial(cv2.resize, ...)``, a random flip and a lambda normalizing;
* ``dict_p1``: albumentations-style transforms taking and returning keyword data, each applied
  when ``random.random() < p``: a resize and a padding with ``p=1``, a flip with ``p=0.5``. The
  images differ in size, so the resize's arguments differ between samples: after a draw, codedag
  cannot tell them from drawn ones, and the cut stays before the resize (``--same-size``
  writes images of one size: the cut is then after the padding);
* ``args``: 16-bit scans windowed in the arguments of the call that takes them
  (``np.clip((img - lo) / (hi - lo), 0, 1)``), resized, rotated by a random angle;
* ``offset``: ``librosa.load(path, sr=16000, offset=random.uniform(...), duration=0.5)``, a random
  window of each clip, then a mel spectrogram: no key of it comes back, so nothing is cached;
* ``spawn``: the ``partial`` script with 2 workers started by ``spawn`` (its data set, holding
  cv2 functions, is pickled for them while the plan is applied).

Printed per idiom: whether the losses are the same (``yes``; ``tol`` where a plan running calls
through torch changed them within its tolerances, by less than 1e-5 of their size), the epochs
after the first
(seconds, plain and codedag, and their ratio), the first epoch's, the prefix cache's cut and the
bytes it read back. The files are small, so a first epoch is mostly codedag's tracing and
planning. It measures; it asserts nothing. Run::

    python benchmarks/code_idioms.py [--only partial args] [--epochs 4] [--images 96] [--same-size]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HEAD = """\
import functools, glob, random, sys, time
import cv2, numpy as np, torch
from torch.utils.data import DataLoader, Dataset
"""

TRAIN = """
def main():
    random.seed(0); np.random.seed(0); torch.manual_seed(0)
    loader = DataLoader(Data(), batch_size=16, shuffle=True{loader})
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(4))
    opt = torch.optim.SGD(net.parameters(), 0.01)
    for epoch in range({epochs}):
        start, total = time.perf_counter(), 0.0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(net(x.float()), y)
            opt.zero_grad(); loss.backward(); opt.step(); total += loss.item()
        print(f"epoch {{epoch}} loss {{total!r}} time {{time.perf_counter() - start:.4f}}", flush=True)


if __name__ == "__main__":
    main()
"""

PARTIAL = """
def normalize(im):
    return (im.astype(np.float32) / 255.0 - 0.5) / 0.25


class Compose:
    def __init__(self, steps): self.steps = steps
    def __call__(self, x):
        for step in self.steps: x = step(x)
        return x


def flip(im):
    return cv2.flip(im, 1) if random.random() < 0.5 else im


class Data(Dataset):
    def __init__(self):
        self.paths = sorted(glob.glob("images/*.png"))
        self.transform = Compose([
            functools.partial(cv2.cvtColor, code=cv2.COLOR_BGR2RGB),
            functools.partial(cv2.resize, dsize=(64, 64), interpolation=cv2.INTER_AREA),
            flip, normalize])
    def __len__(self): return len(self.paths)
    def __getitem__(self, i):
        img = self.transform(cv2.imread(self.paths[i]))
        return torch.from_numpy(img.transpose(2, 0, 1).copy()), i % 4
"""

DICT_P1 = """
class Transform:
    def __init__(self, p=1.0): self.p = p
    def __call__(self, **data):
        if random.random() < self.p:
            data["image"] = self.apply(data["image"])
        return data


class LongestMaxSize(Transform):
    def apply(self, img):
        h, w = img.shape[:2]; s = 64 / max(h, w)
        return cv2.resize(img, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)


class PadIfNeeded(Transform):
    def apply(self, img):
        h, w = img.shape[:2]
        return cv2.copyMakeBorder(img, 0, 64 - h, 0, 64 - w, cv2.BORDER_CONSTANT, value=0)


class HorizontalFlip(Transform):
    def apply(self, img): return cv2.flip(img, 1)


class Compose:
    def __init__(self, transforms): self.transforms = transforms
    def __call__(self, **data):
        for t in self.transforms: data = t(**data)
        return data


class Data(Dataset):
    def __init__(self):
        self.paths = sorted(glob.glob("images/*.png"))
        self.transform = Compose([LongestMaxSize(), PadIfNeeded(), HorizontalFlip(p=0.5)])
    def __len__(self): return len(self.paths)
    def __getitem__(self, i):
        image = cv2.cvtColor(cv2.imread(self.paths[i]), cv2.COLOR_BGR2RGB)
        out = self.transform(image=image)["image"]
        return torch.from_numpy(out.transpose(2, 0, 1).copy()), i % 4
"""

ARGS = """
class Data(Dataset):
    def __init__(self, lo=10000.0, hi=50000.0):
        self.paths = sorted(glob.glob("scans/*.png")); self.lo, self.hi = lo, hi
    def __len__(self): return len(self.paths)
    def __getitem__(self, i):
        img = cv2.imread(self.paths[i], cv2.IMREAD_UNCHANGED).astype(np.float32)
        img = np.clip((img - self.lo) / (self.hi - self.lo), 0.0, 1.0)
        img = cv2.resize(img, (96, 96), interpolation=cv2.INTER_AREA)
        m = cv2.getRotationMatrix2D((48, 48), np.random.uniform(-10, 10), 1.0)
        img = cv2.warpAffine(img, m, (96, 96), borderMode=cv2.BORDER_REFLECT)
        return torch.from_numpy(img)[None], i % 4
"""

OFFSET = """
import librosa


class Data(Dataset):
    def __init__(self): self.paths = sorted(glob.glob("clips/*.wav"))
    def __len__(self): return len(self.paths)
    def __getitem__(self, i):
        total = librosa.get_duration(path=self.paths[i])
        offset = random.uniform(0, max(0.0, total - 0.5))
        wav, _ = librosa.load(self.paths[i], sr=16000, offset=offset, duration=0.5)
        wav = np.pad(wav, (0, 8000 - len(wav)))
        mel = librosa.feature.melspectrogram(y=wav, sr=16000, n_mels=32)
        return torch.from_numpy(librosa.power_to_db(mel).astype(np.float32)), i % 4
"""

IDIOMS = {
    "partial": (PARTIAL, ""),
    "dict_p1": (DICT_P1, ""),
    "args": (ARGS, ""),
    "offset": (OFFSET, ""),
    "spawn": (PARTIAL, ', num_workers=2, multiprocessing_context="spawn"'),
}


def write_files(folder: Path, images: int, same_size: bool) -> None:
    """PNG images, 16-bit PNG scans and WAV clips, once."""
    import cv2
    import soundfile

    rng = np.random.default_rng(0)
    for name in ("images", "scans", "clips"):
        (folder / name).mkdir(exist_ok=True)
    for i in range(images):
        h, w = (
            (200, 240) if same_size else (int(rng.integers(180, 260)), int(rng.integers(200, 300)))
        )
        cv2.imwrite(
            str(folder / "images" / f"{i:03d}.png"), rng.integers(0, 255, (h, w, 3), np.uint8)
        )
        scan = rng.normal(30000, 8000, (256, 256)).clip(0, 65535).astype(np.uint16)
        cv2.imwrite(str(folder / "scans" / f"{i:03d}.png"), scan)
    for i in range(images // 2):
        n = int(22050 * rng.uniform(0.8, 1.5))
        clip = (0.2 * np.sin(np.arange(n) * (0.05 + 0.01 * (i % 4)))).astype(np.float32)
        soundfile.write(str(folder / "clips" / f"{i:03d}.wav"), clip, 22050)


def _epochs(stdout: str) -> tuple[list[str], list[float]]:
    losses, times = [], []
    for line in stdout.splitlines():
        if line.startswith("epoch "):
            parts = line.split()
            losses.append(parts[3])
            times.append(float(parts[5]))
    return losses, times


def _same(plain: list[str], ran: list[str], results: dict[str, object]) -> str:
    """``yes`` (the same losses), ``tol`` (a plan that runs calls through torch changed them by
    less than 1e-5 of their size: its tolerances allow it) or ``NO``."""
    if plain and plain == ran:
        return "yes"
    moved = results.get("moved", [])
    through_torch = any(d.get("section") in ("batched", "calls") for d in moved)  # type: ignore[union-attr]
    close = len(plain) == len(ran) and all(
        abs(float(a) - float(b)) <= 1e-5 * abs(float(a)) for a, b in zip(plain, ran, strict=True)
    )
    return "tol" if plain and through_torch and close else "NO"


def run_idiom(folder: Path, name: str, epochs: int) -> dict[str, object]:
    """Run one idiom plainly and under ``codedag run``; their figures."""
    body, loader = IDIOMS[name]
    script = folder / f"train_{name}.py"
    script.write_text(HEAD + body + TRAIN.format(loader=loader, epochs=epochs))
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    plain = subprocess.run(
        [sys.executable, script.name], cwd=folder, capture_output=True, text=True, env=env
    )
    out = folder / f"out_{name}"
    env_run = {**env, "CODEDAG_PREFIX_CACHE_DIR": str(folder / f"prefix_{name}")}
    command = [sys.executable, "-m", "codedag", "run", "--replan", "--out", str(out), "--"]
    ran = subprocess.run(
        [*command, "python", script.name], cwd=folder, capture_output=True, text=True, env=env_run
    )
    plain_losses, plain_times = _epochs(plain.stdout)
    run_losses, run_times = _epochs(ran.stdout)
    results = (
        json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    )
    cuts = [d for d in results.get("moved", []) if d.get("section") == "cache"]
    kept = [d for d in results.get("kept", []) if d.get("section") == "cache"]
    return {
        "ok": plain.returncode == 0 and ran.returncode == 0,
        "error": (plain.stderr or ran.stderr).strip().splitlines()[-1:]
        if not (plain.returncode == 0 and ran.returncode == 0)
        else [],
        "same": _same(plain_losses, run_losses, results),
        "plain_first": plain_times[0] if plain_times else 0.0,
        "run_first": run_times[0] if run_times else 0.0,
        "plain_later": sum(plain_times[1:]),
        "run_later": sum(run_times[1:]),
        "cut": cuts[0]["what"].split(" -> ")[-1] if cuts else "-",
        "why": (kept[0]["reason"].split(";")[0] if kept and not cuts else ""),
        "read_mb": (results.get("cache", {}).get("hit_bytes", 0) or 0) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(IDIOMS), default=list(IDIOMS))
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--images", type=int, default=96)
    parser.add_argument("--same-size", action="store_true", help="images of one size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="codedag-idioms-") as tmp:
        folder = Path(tmp)
        write_files(folder, args.images, args.same_size)
        print(f"{args.images} images, {args.epochs} epochs; seconds; later: epochs 2-{args.epochs}")
        header = f"{'idiom':<9} {'same':<5} {'plain e1':>8} {'run e1':>7} {'plain later':>11} "
        print(header + f"{'run later':>9} {'later x':>7} {'read MB':>8}  cut")
        for name in args.only:
            r = run_idiom(folder, name, args.epochs)
            if not r["ok"]:
                print(f"{name:<9} failed: {' '.join(r['error'])}")  # type: ignore[arg-type]
                continue
            ratio = r["plain_later"] / r["run_later"] if r["run_later"] else 0.0  # type: ignore[operator]
            cut = r["cut"] if r["cut"] != "-" else f"none: {str(r['why'])[:90]}"
            print(
                f"{name:<9} {r['same']:<5} {r['plain_first']:>8.2f} "
                f"{r['run_first']:>7.2f} {r['plain_later']:>11.2f} {r['run_later']:>9.2f} "
                f"{ratio:>6.2f}x {r['read_mb']:>8.1f}  {cut}"
            )


if __name__ == "__main__":
    main()
