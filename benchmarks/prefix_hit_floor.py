"""What a prefix cache hit costs the loading thread, against the floor of any cache.

The kaggle script of ``run_overhead.py`` (a PNG read with ``cv2.imread``, converted, resized; a
random flip, the tensor), 0 workers, ``--epochs`` epochs of ``--images`` files, three variants,
each in a process of its own, interleaved over ``--rounds`` rounds:

* ``own``: the data set as written;
* ``cache``: the same data set under ``codedag.accelerate(loader)`` (its first epoch traced,
  planned and stored; the epochs after the second read every resized image back);
* ``floor``: the data set with its decode, conversion and resize replaced by reading the
  resized image's bytes from a dict in memory: what any cache of that value must at least do.

Printed: the loading thread's CPU time per sample (``time.thread_time``, the lowest and the
median of the epochs after the second), each variant against ``own``, and what decides a hit's
cost: the Python calls per sample (cProfile over one more epoch) and the store's reads per
sample. It measures; it asserts nothing. Run::

    python benchmarks/prefix_hit_floor.py [--images 256] [--rounds 2] [--epochs 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = ("own", "cache", "floor")

_SCRIPT = """
import cProfile, glob, json, os, pstats, sys, time
import cv2, numpy as np, torch
from torch.utils.data import DataLoader, Dataset

variant, folder, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(glob.glob(os.path.join(folder, "*.png")))


class ImageFiles(Dataset):
    def __len__(self):
        return len(files)

    def __getitem__(self, i):
        img = cv2.imread(files[i])
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        img = cv2.resize(img, (64, 64))
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        return torch.from_numpy(img.astype(np.float32) / 255.0).permute(2, 0, 1), i % 10


STORED = {}


class Floor(ImageFiles):
    def __getitem__(self, i):
        img = np.frombuffer(STORED[i], np.uint8).reshape(64, 64, 3)
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        return torch.from_numpy(img.astype(np.float32) / 255.0).permute(2, 0, 1), i % 10


if variant == "floor":
    for i, path in enumerate(files):
        image = cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB)
        STORED[i] = cv2.resize(image, (64, 64)).tobytes()
loader = DataLoader(Floor() if variant == "floor" else ImageFiles(), batch_size=32, shuffle=True)
reads = {"get": 0, "meta": 0}
if variant == "cache":
    import codedag
    from codedag.store.tiers import PrefixStore

    for name in reads:
        def counted(self, *args, _name=name, _original=getattr(PrefixStore, name)):
            reads[_name] += 1
            return _original(self, *args)
        setattr(PrefixStore, name, counted)
    loader = codedag.accelerate(loader)


def epoch():
    start = time.thread_time()
    for _ in loader:
        pass
    return (time.thread_time() - start) * 1e3 / len(files)


times = [epoch() for _ in range(epochs)]
for name in reads:
    reads[name] = 0
profile = cProfile.Profile()
profile.enable()
epoch()
profile.disable()
calls = pstats.Stats(profile).total_calls / len(files)
print(json.dumps({"ms": times, "calls": calls, "reads": {k: v / len(files) for k, v in reads.items()}}))
"""


def _run(variant: str, folder: Path, epochs: int, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, variant, str(folder), str(epochs)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256, help="PNG files of 256 px (256)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (2)")
    parser.add_argument("--epochs", type=int, default=8, help="epochs per run, 3 at least (8)")
    args = parser.parse_args()
    if args.epochs < 3 or args.images < 1 or args.rounds < 1:
        parser.error("--epochs must be 3 or more, --images and --rounds 1 or more")
    sys.path.insert(0, str(Path(__file__).parent))
    from run_overhead import write_images

    with tempfile.TemporaryDirectory(prefix="codedag-hit-floor-") as tmp:
        work = Path(tmp)
        write_images(work / "images", args.images, 256)
        found: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                env = {**os.environ, "CODEDAG_CACHE_DIR": str(work / "cache")}
                env["CODEDAG_PREFIX_CACHE_DIR"] = str(work / f"prefix{round_}")
                found[variant].append(_run(variant, work / "images", args.epochs, env))
            print(f"  round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    later = {v: [t for run in runs for t in run["ms"][2:]] for v, runs in found.items()}
    own = statistics.median(later["own"])
    print(
        f"{args.images} PNG files of 256 px, cv2 read, converted and resized to 64 px, a random "
        f"flip; 0 workers; epochs 3-{args.epochs} of {args.rounds} runs each"
    )
    print("  loading thread's CPU per sample, ms:")
    print(f"  {'variant':8s} {'lowest':>8s} {'median':>8s} {'/ own':>7s} {'calls':>7s}  reads")
    for variant, times in later.items():
        median = statistics.median(times)
        calls = statistics.median(run["calls"] for run in found[variant])
        reads = found[variant][-1]["reads"]
        shown = ", ".join(f"{k} {v:.2f}" for k, v in reads.items()) if variant == "cache" else "-"
        print(
            f"  {variant:8s} {min(times):8.3f} {median:8.3f} {median / own:6.2f}x "
            f"{calls:7.0f}  {shown}"
        )
    cache, floor = (statistics.median(later[v]) for v in ("cache", "floor"))
    print(f"  a hit's cost above the floor: {cache - floor:.3f} ms per sample")


if __name__ == "__main__":
    main()
