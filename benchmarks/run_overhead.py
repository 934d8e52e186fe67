"""What ``codedag run`` gains and costs a training script run unmodified, side by side in one run.

Two scripts are written into a temporary folder and run in subprocesses, ``python SCRIPT`` (plain)
against ``python -m codedag run -- python SCRIPT`` (codedag), in ``--rounds`` interleaved rounds
(plain first, then codedag first, ...: :func:`codedag.measure.round_order`):

* ``kaggle``: image files on disk (PNG, ``--image-px`` square), a Dataset decoding them with cv2,
  resizing to ``--input-px`` and flipping at random, a shuffled DataLoader built inline, a small
  CNN, ``--epochs`` epochs. Each round also runs codedag a second time right after its first run:
  the plan is stored then, so it applies from the first batch. Per epoch: the time the script
  waited for data (measured by the script around ``next()``, the same code in every variant),
  plain and codedag, and their ratio; the second run's first epoch against the first run's; the
  whole run's wall time (interpreter start to exit, tracing and planning included) and CPU time
  (the process and its DataLoader workers: less disturbed by other work on a busy machine), and
  their ratios;
  whether the losses the script prints are the same (they must be). ``--workers`` and
  ``--start-method`` set its loader's ``num_workers`` and ``multiprocessing_context`` (workers
  started with ``spawn`` or ``forkserver`` receive the plan and apply it themselves), and
  ``--persistent`` its ``persistent_workers``.
  ``--way`` picks how kaggle's codedag variant gets codedag: ``run`` (the default, the script
  unmodified under ``codedag run``), ``accelerate`` (a ``loader = codedag.accelerate(loader)``
  line in the script, which the plain variant skips) or ``lightning`` (the same training as a
  LightningModule under ``Trainer.fit``, with codedag's ``AccelerateCallback`` in the codedag
  variant; the data wait is then the time between batches, Lightning's hooks included).
* ``slices``: a Dataset that only slices rows of a tensor in memory: nothing to gain, so the
  whole run's time ratio is what codedag costs (the goal: within 3 %), first run and second.

The extra seconds of a whole run are mostly fixed (codedag's imports, tracing and planning once),
so each is also given as the run length of which it is 3 %.

Every first codedag run plans from scratch (``--replan``) with a fresh prefix cache
(``CODEDAG_PREFIX_CACHE_DIR``); the second run reads the plan it stored and the values it cached.
The calibrations (``CODEDAG_CACHE_DIR``) are measured by an untimed warm-up run and kept, as on a
machine where codedag ran before; ``--cold`` gives each round fresh ones. Figures are medians
over rounds; the spread is half the range. Whole-run times include the interpreter's start and
imports, which a longer training run pays once. It measures; it asserts nothing. Run::

    python benchmarks/run_overhead.py [--rounds 3] [--images 512] [--epochs 3] [--json]
    python benchmarks/run_overhead.py --rounds 1 --images 64 --slice-samples 2048  # a quick check
    python benchmarks/run_overhead.py --only kaggle --images 64 --way lightning
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codedag.measure import round_order

_IMPORTS = """\
import glob, os, sys, time, warnings
import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
"""

_PIPELINE = """
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")
SETTINGS = {settings!r}
OUT = os.environ.get("BENCH_CODEDAG_OUT")  # set: the codedag variant of --way accelerate|lightning


class ImageFiles(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = cv2.imread(self.files[i])
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        img = cv2.resize(img, (SETTINGS["input_px"], SETTINGS["input_px"]))
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        x = torch.from_numpy(img.astype(np.float32) / 255.0).permute(2, 0, 1)
        return x, i % 10


def model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(32, 10),
    )


"""
"""The data set and the CNN, the same in every way of running the kaggle script."""

KAGGLE = (
    _IMPORTS
    + _PIPELINE
    + """\
def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    files = sorted(glob.glob(os.path.join(ROOT, "*.png")))
    train = DataLoader(
        ImageFiles(files), batch_size=SETTINGS["batch_size"], shuffle=True,
        num_workers=SETTINGS["workers"], multiprocessing_context=SETTINGS["start_method"],
        persistent_workers=SETTINGS["persistent"],
    )
    if SETTINGS["accelerate"] and OUT:
        import codedag

        train = codedag.accelerate(train, replan=os.environ.get("BENCH_REPLAN") == "1")
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for epoch in range(SETTINGS["epochs"]):
        total, wait_s, start = 0.0, 0.0, time.perf_counter()
        it = iter(train)
        while True:
            t0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                wait_s += time.perf_counter() - t0
                break
            wait_s += time.perf_counter() - t0
            loss = torch.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {{epoch}} loss {{total!r}}", flush=True)
        print(f"timing {{epoch}} {{wait_s!r}} {{time.perf_counter() - start!r}}", flush=True)
    if SETTINGS["accelerate"] and OUT:
        from codedag.integrations.accelerate import release

        release(train).save(OUT)


if __name__ == "__main__":
    main()
"""
)

LIGHTNING = (
    _IMPORTS
    + "import lightning.pytorch as pl\n"
    + _PIPELINE
    + """\
class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = model()

    def training_step(self, batch, index):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Timing(pl.Callback):
    \"\"\"Time between batches (the loader's next() and Lightning's own hooks) and the losses.\"\"\"

    def on_train_epoch_start(self, trainer, module):
        self.total, self.wait_s = 0.0, 0.0
        self.start = self.mark = time.perf_counter()

    def on_train_batch_start(self, trainer, module, batch, index):
        self.wait_s += time.perf_counter() - self.mark

    def on_train_batch_end(self, trainer, module, outputs, batch, index):
        self.total += outputs["loss"].item()
        self.mark = time.perf_counter()

    def on_train_epoch_end(self, trainer, module):
        now = time.perf_counter()
        self.wait_s += now - self.mark
        epoch = trainer.current_epoch
        print(f"epoch {{epoch}} loss {{self.total!r}}", flush=True)
        print(f"timing {{epoch}} {{self.wait_s!r}} {{now - self.start!r}}", flush=True)


def main():
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    files = sorted(glob.glob(os.path.join(ROOT, "*.png")))
    train = DataLoader(
        ImageFiles(files), batch_size=SETTINGS["batch_size"], shuffle=True,
        num_workers=SETTINGS["workers"], multiprocessing_context=SETTINGS["start_method"],
        persistent_workers=SETTINGS["persistent"],
    )
    callbacks = [Timing()]
    if OUT:
        from codedag.integrations.lightning_accelerate import AccelerateCallback

        callbacks.append(AccelerateCallback(OUT, replan=os.environ.get("BENCH_REPLAN") == "1"))
    trainer = pl.Trainer(
        max_epochs=SETTINGS["epochs"], accelerator="cpu", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=callbacks,
    )
    trainer.fit(Net(), train_dataloaders=train)


if __name__ == "__main__":
    main()
"""
)

SLICES = """\
import time
import torch
from torch.utils.data import DataLoader, Dataset

SETTINGS = {settings!r}


class Rows(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(SETTINGS["samples"], 64, generator=g)
        self.y = torch.randint(0, 10, (SETTINGS["samples"],), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i, :48], self.y[i]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    train = DataLoader(Rows(), batch_size=SETTINGS["batch_size"], shuffle=True)
    net = torch.nn.Sequential(torch.nn.Linear(48, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for epoch in range(SETTINGS["epochs"]):
        total, wait_s, start = 0.0, 0.0, time.perf_counter()
        it = iter(train)
        while True:
            t0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                wait_s += time.perf_counter() - t0
                break
            wait_s += time.perf_counter() - t0
            loss = torch.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {{epoch}} loss {{total!r}}", flush=True)
        print(f"timing {{epoch}} {{wait_s!r}} {{time.perf_counter() - start!r}}", flush=True)


if __name__ == "__main__":
    main()
"""


WAYS = {
    "run": "codedag run -- python train.py",
    "accelerate": "loader = codedag.accelerate(loader) in the script",
    "lightning": "Lightning Trainer.fit with codedag's AccelerateCallback",
}
"""How the kaggle script's codedag variant gets codedag (``--way``)."""


@dataclass
class Run:
    """One subprocess run of a script: its wall and CPU time, per-epoch figures and losses."""

    wall_s: float
    wait_s: list[float]
    epoch_s: list[float]
    losses: list[str]
    plan_status: str = ""
    trace_s: float = 0.0
    plan_s: float = 0.0
    cpu_s: float = 0.0
    """User and system CPU time of the process and its children (DataLoader workers)."""
    cache_hits: int = 0
    cache_misses: int = 0
    """The prefix cache's values read back and looked up in vain (codedag runs)."""


@dataclass
class Variant:
    """Every round's run of one variant."""

    name: str
    runs: list[Run] = field(default_factory=list)

    def median(self, pick: Any) -> float:
        values = [pick(run) for run in self.runs]
        return statistics.median(values) if values else float("nan")

    def spread(self, pick: Any) -> float:
        values = [pick(run) for run in self.runs]
        return (max(values) - min(values)) / 2 if len(values) > 1 else 0.0


def write_images(folder: Path, count: int, side_px: int) -> None:
    import cv2
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        img = rng.integers(0, 255, (side_px, side_px, 3), dtype=np.uint8)
        cv2.imwrite(str(folder / f"{i:05d}.png"), img)


def run_script(
    script: Path,
    codedag: bool,
    env: dict[str, str],
    out: Path | None,
    replan: bool = False,
    way: str = "run",
) -> Run:
    """Run ``script`` plainly or with codedag (``way``: under ``codedag run``, or the script's own
    ``codedag.accelerate`` line or Lightning callback, which ``BENCH_CODEDAG_OUT`` turns on;
    ``replan``: ignore a stored plan); parse what it prints."""
    command = [sys.executable]
    env = dict(env)
    if codedag and way == "run":
        command += ["-m", "codedag", "run", "--out", str(out), *(["--replan"] if replan else [])]
        command += ["--", "python"]
    elif codedag:
        env.update(BENCH_CODEDAG_OUT=str(out), BENCH_REPLAN="1" if replan else "0")
    command.append(script.name)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=script.parent, capture_output=True, text=True, env=env, check=False
    )
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    lines = done.stdout.splitlines()
    losses = [line for line in lines if line.startswith("epoch ")]
    timings = [line.split() for line in lines if line.startswith("timing ")]
    run = Run(wall_s, [float(t[2]) for t in timings], [float(t[3]) for t in timings], losses)
    run.cpu_s = cpu_s
    if codedag and out is not None:
        from codedag.integrations.run_results import load_run_results

        results = load_run_results(out)
        run.plan_status, run.trace_s, run.plan_s = (
            results.plan_status,
            results.trace_s,
            results.plan_s,
        )
        run.cache_hits = int(results.cache.get("hits") or 0)
        run.cache_misses = sum((results.cache.get("misses") or {}).values())
    return run


def clear_prefix_cache(folder: Path) -> None:
    """Delete a prefix cache's RAM tier (it lives outside its folder) and the folder."""
    from codedag.store.tiers import PrefixStore, StoreSettings

    if folder.exists():
        PrefixStore.open(
            StoreSettings(folder=folder, ram_budget_bytes=1, disk_budget_bytes=1)
        ).clear()
    shutil.rmtree(folder, ignore_errors=True)


def environment(work: Path, caches: Path, cold: bool) -> dict[str, str]:
    """The scripts' environment: a fresh prefix-cache folder, the plan and calibration folder
    shared by every round (``cold``: fresh too), and a bytecode cache of their own (as an
    installed package has), even where ``PYTHONDONTWRITEBYTECODE`` is set."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": "0",
        "PYTHONPYCACHEPREFIX": str(work / "pycache"),
        "CODEDAG_CACHE_DIR": str((caches if cold else work) / "cache"),
        "CODEDAG_PREFIX_CACHE_DIR": str(caches / "prefix"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(
    script: Path, rounds: int, work: Path, cold: bool, way: str = "run"
) -> dict[str, Variant]:
    """``rounds`` interleaved rounds of plain, codedag's first run (``--replan``) and its second
    run, after one untimed run of each (bytecode compiled, files in the page cache, calibrations
    measured unless ``cold``)."""
    warm = work / "warm-up"
    run_script(script, False, environment(work, warm, cold), None)
    run_script(script, True, environment(work, warm, cold), warm / "out", way=way)
    clear_prefix_cache(warm / "prefix")
    variants = {name: Variant(name) for name in ("plain", "codedag", "codedag 2nd run")}
    for r in range(rounds):
        caches = work / f"round{r}"
        env = environment(work, caches, cold)
        for name in round_order(["plain", "codedag"], r):
            if name == "plain":
                variants["plain"].runs.append(run_script(script, False, env, None))
                continue
            first = run_script(script, True, env, caches / "out1", replan=True, way=way)
            variants["codedag"].runs.append(first)
            again = run_script(script, True, env, caches / "out2", way=way)
            variants["codedag 2nd run"].runs.append(again)
        clear_prefix_cache(caches / "prefix")
        print(f"  round {r + 1} of {rounds} done", file=sys.stderr, flush=True)
    return {name: v for name, v in variants.items() if v.runs}


def ratio(a: float, b: float) -> str:
    return f"{b / a:.3f}x" if a > 0 else "-"


def whole_run(label: str, variants: dict[str, Variant], pick: Any) -> dict[str, float]:
    """Print a whole-run figure of every variant, its ratio to plain and the extra seconds (with
    the run length of which they are 3 %); return the medians."""
    names = list(variants)
    values = {n: variants[n].median(pick) for n in names}
    print(
        f"  {label}, s: "
        + ", ".join(f"{n} {values[n]:.2f} +-{variants[n].spread(pick):.2f}" for n in names)
    )
    print(
        f"  {label} / plain: "
        + ", ".join(f"{n} {ratio(values['plain'], values[n])}" for n in names[1:])
    )
    extra = {n: values[n] - values["plain"] for n in names[1:]}
    print(
        f"  {label} - plain, s: "
        + ", ".join(
            f"{n} {extra[n]:+.2f}"
            + (f" (a 3 % share of a {extra[n] / 0.03:.0f} s run)" if extra[n] > 0 else "")
            for n in names[1:]
        )
    )
    return values


def report(title: str, variants: dict[str, Variant]) -> dict[str, Any]:
    """Print one script's table; return its figures."""
    plain = variants["plain"]
    print(f"\n{title}")
    epochs = min(len(run.wait_s) for v in variants.values() for run in v.runs)
    names = list(variants)
    print("  data wait per epoch, s (median over rounds +- half range), and ratio to plain")
    print(
        "  epoch  "
        + "  ".join(f"{n:>24}" for n in names)
        + "  "
        + "  ".join(f"{n + ' / plain':>24}" for n in names[1:])
    )
    figures: dict[str, Any] = {"epochs": []}
    for e in range(epochs):
        waits = {n: variants[n].median(lambda run, e=e: run.wait_s[e]) for n in names}
        spreads = {n: variants[n].spread(lambda run, e=e: run.wait_s[e]) for n in names}
        cells = "  ".join(f"{waits[n]:>15.3f} +-{spreads[n]:>6.3f}" for n in names)
        ratios = "  ".join(f"{ratio(waits['plain'], waits[n]):>24}" for n in names[1:])
        print(f"  {e + 1:>5}  {cells}  {ratios}")
        figures["epochs"].append({"epoch": e + 1, "data_wait_s": waits})
    walls = whole_run("whole run", variants, lambda run: run.wall_s)
    cpus = whole_run("whole run's CPU", variants, lambda run: run.cpu_s)
    first = variants.get("codedag")
    if first is not None:
        trace = first.median(lambda run: run.trace_s)
        plan = first.median(lambda run: run.plan_s)
        statuses = sorted({run.plan_status for run in first.runs})
        print(
            f"  codedag's first run: plan {', '.join(statuses)}; traced in {trace:.2f} s, "
            f"planned in {plan:.2f} s (median), within epoch 1 (after its first batch; with "
            "workers once the planner's background import ended): its data wait includes them"
        )
    for name in ("codedag", "codedag 2nd run"):
        if name in variants:
            hits = variants[name].median(lambda run: run.cache_hits)
            misses = variants[name].median(lambda run: run.cache_misses)
            print(f"  {name}: prefix cache {hits:.0f} hits, {misses:.0f} misses (median)")
    second = variants.get("codedag 2nd run")
    if first is not None and second is not None:
        a = first.median(lambda run: run.wait_s[0])
        b = second.median(lambda run: run.wait_s[0])
        statuses = sorted({run.plan_status for run in second.runs})
        print(
            f"  2nd run (plan {', '.join(statuses)}): epoch 1 data wait {b:.3f} s against the "
            f"1st run's {a:.3f} s: {ratio(a, b)}"
        )
    reference = plain.runs[0].losses
    same = all(run.losses == reference for v in variants.values() for run in v.runs)
    print(f"  losses the same in every run: {'yes' if same else 'NO'}")
    figures.update(whole_run_s=walls, whole_run_cpu_s=cpus, losses_equal=same)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of each script (3)")
    parser.add_argument("--images", type=int, default=512, help="image files of kaggle (512)")
    parser.add_argument("--image-px", type=int, default=256, help="side of a file's image (256)")
    parser.add_argument("--input-px", type=int, default=64, help="side the CNN gets (64)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size of both (32)")
    parser.add_argument("--workers", type=int, default=0, help="kaggle's DataLoader workers (0)")
    parser.add_argument(
        "--start-method",
        choices=["fork", "spawn", "forkserver"],
        default=None,
        help="how kaggle's loader starts its workers (default: the platform's)",
    )
    parser.add_argument(
        "--persistent", action="store_true", help="kaggle's workers persist across epochs"
    )
    parser.add_argument(
        "--slice-samples", type=int, default=200_000, help="rows of the slices data set (200000)"
    )
    parser.add_argument("--only", choices=("kaggle", "slices"), help="run one script only")
    parser.add_argument(
        "--way",
        choices=WAYS,
        default="run",
        help="how kaggle gets codedag: `codedag run` (the default), a `codedag.accelerate(loader)` "
        "line in the script, or Lightning's Trainer.fit with the AccelerateCallback",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="fresh calibrations in every round (codedag's very first run on a machine)",
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()

    out: dict[str, Any] = {"settings": vars(args)}
    with tempfile.TemporaryDirectory(prefix="codedag-run-overhead-") as tmp:
        work = Path(tmp)
        if args.only in (None, "kaggle"):
            folder = work / "kaggle"
            write_images(folder / "images", args.images, args.image_px)
            settings = {
                "input_px": args.input_px,
                "batch_size": args.batch_size,
                "workers": args.workers,
                "start_method": args.start_method if args.workers else None,
                "persistent": bool(args.persistent and args.workers),
                "epochs": args.epochs,
                "accelerate": args.way == "accelerate",
            }
            script = folder / "train.py"
            text = LIGHTNING if args.way == "lightning" else KAGGLE
            script.write_text(text.format(settings=settings))
            variants = measure(script, args.rounds, folder, args.cold, args.way)
            title = (
                f"kaggle ({WAYS[args.way]}): {args.images} PNG files of {args.image_px} px, cv2 decode, resize to "
                f"{args.input_px} px, random flip, batch {args.batch_size}, "
                f"{args.workers} workers"
                + (
                    f" started with {args.start_method}"
                    if args.start_method and args.workers
                    else ""
                )
                + (" (persistent)" if args.persistent and args.workers else "")
                + f", small CNN, {args.epochs} epochs, {args.rounds} rounds"
            )
            out["kaggle"] = report(title, variants)
        if args.only in (None, "slices"):
            folder = work / "slices"
            folder.mkdir()
            settings = {
                "samples": args.slice_samples,
                "batch_size": args.batch_size,
                "epochs": args.epochs,
            }
            script = folder / "train.py"
            script.write_text(SLICES.format(settings=settings))
            variants = measure(script, args.rounds, folder, args.cold)
            title = (
                f"slices: {args.slice_samples} rows sliced from a tensor in memory (nothing to "
                f"gain), batch {args.batch_size}, MLP, {args.epochs} epochs, {args.rounds} rounds"
            )
            out["slices"] = report(title, variants)
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
