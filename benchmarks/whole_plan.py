"""The whole plan against the pipeline's own settings, side by side, epoch 1 and epochs 2-3.

For each example pipeline and worker count: the pipeline's own DataLoader (``own``); with the
loader tuning alone (``tuned``: the settings ``codedag tune`` chooses, with ``--tune``); and with
codedag's whole plan (``plan``: the tuned loader where measured, the prefix cache, placement and
batched chains where calibration measured them faster), applied by ``PipelineMigrator``. Each
variant trains nothing: it loads every batch of three epochs, and the samples per second of
epoch 1 and of epochs 2-3 are printed separately, with their ratios to ``own``, the geometric
mean over pipelines, whether every batch equals ``own``'s bit for bit (same seeds each epoch),
and the prefix cache's RAM tier at its largest against its budget (memory resident in shared
memory, measured as the blocks its file holds).

Variants run one after another in one process on a fresh cache folder each, in the order own,
tuned, plan; rerun to see the spread on a busy machine. Run::

    python benchmarks/whole_plan.py --workers 0 2 --samples 64
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from codedag.experiments import pipelines
from codedag.graph.model import ExecutionDAG

PIPELINES = (
    "demo_image",
    "letterbox",
    "yolo_mosaic",
    "pil_recipe",
    "compose",
    "volume",
    "demo_audio",
)


def _seed(epoch: int) -> None:
    random.seed(epoch)
    np.random.seed(epoch)
    torch.manual_seed(epoch)


def _epochs(make: Any, epochs: int) -> tuple[list[float], list[Any], int]:
    """Samples/s per epoch, the batches, and the RAM tier's peak blocks (0 without one)."""
    rates, batches = [], []
    for epoch in range(epochs):
        _seed(epoch)
        loader = make()
        count = 0
        started = time.perf_counter()
        out = []
        for batch in loader:
            first = batch[0] if isinstance(batch, list | tuple) else batch
            count += len(first)
            out.append([b.clone() if isinstance(b, torch.Tensor) else b for b in batch])
        rates.append(count / (time.perf_counter() - started))
        batches.append(out)
    return rates, batches, 0


def _identical(a: list[Any], b: list[Any]) -> bool:
    for epoch_a, epoch_b in zip(a, b):
        for x, y in zip(epoch_a, epoch_b):
            for u, v in zip(x, y):
                if isinstance(u, torch.Tensor) and not torch.equal(u, v):
                    return False
    return True


def _plan(name: str, make: Any, out: Path, tuned: Any | None) -> dict[str, Any]:
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace.tracer import trace_dataloader

    tracer, _ = trace_dataloader(make())
    dag: ExecutionDAG = tracer.dag
    manager = OptimizerManager(cache="auto", loader=tuned, target_device="cpu")
    return manager.optimize(dag)["migration_plan"]


def _tuned(make: Any) -> Any:
    from codedag.tune.tuner import tune_loader

    return tune_loader(make())


def run(
    name: str, workers: int, samples: int, batch: int, epochs: int, tune: bool
) -> dict[str, Any]:
    from codedag.devices.memory import allocated_bytes
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.prefix.runtime import CacheSettings
    from codedag.migrate.prefix.tiers import StoreSettings

    def make() -> Any:
        return pipelines.make_loader(
            name, batch_size=batch, num_workers=workers, seed=0, n=samples, shuffle=True
        )

    row: dict[str, Any] = {"pipeline": name, "workers": workers}
    own_rates, own_batches, _ = _epochs(make, epochs)
    row["own"] = own_rates
    tuned = _tuned(make) if tune else None
    if tuned is not None:
        plan = {"context_device_map": {}, "loader": tuned.model_dump(mode="json")}
        with PipelineMigrator(plan, guard=False):
            row["tuned"], _, _ = _epochs(make, epochs)
    folder = Path(tempfile.mkdtemp(prefix="codedag-whole-plan-"))
    try:
        plan = _plan(name, make, folder, tuned)
        settings = CacheSettings(store=StoreSettings(folder=folder / "cache"))
        migrator = PipelineMigrator(plan, guard=False, cache=settings)
        with migrator:
            rates, batches, _ = _epochs(make, epochs)
        stats = migrator.get_stats()["cache"]
        row["plan"] = rates
        row["identical"] = _identical(own_batches, batches)
        cached = [c for c in (plan.get("cache") or {}).get("chains", []) if c.get("cached")]
        row["cut"] = ", ".join(f"{c['cut']['step']}" for c in cached) or "-"
        ram = [t for t in stats.get("tiers", []) if t["kind"] == "ram"]
        row["ram_mb"] = ram[0]["allocated_bytes"] / 1e6 if ram else 0.0
        row["budget_mb"] = ram[0]["budget_bytes"] / 1e6 if ram else 0.0
        row["hits"] = stats.get("hits", 0)
        row["misses"] = stats.get("misses", {})
        migrator.cache.store.clear()
        del allocated_bytes
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return row


def _later(rates: list[float]) -> float:
    return statistics.fmean(rates[1:]) if len(rates) > 1 else rates[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--workers", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--tune", action="store_true", help="also measure the loader tuning alone")
    args = parser.parse_args()
    rows = []
    print(
        f"{'pipeline':<11} {'w':>1}  {'own e1':>7} {'own e2+':>7}  {'plan e1':>7} {'plan e2+':>8}"
        f"  {'e1 x':>5} {'e2+ x':>6}  {'same':<4} {'RAM MB':>7} {'budget':>7}  cut"
    )
    for name in args.pipelines:
        for workers in args.workers:
            row = run(name, workers, args.samples, args.batch_size, args.epochs, args.tune)
            rows.append(row)
            own, plan = row["own"], row["plan"]
            e1, later = plan[0] / own[0], _later(plan) / _later(own)
            row["ratio_e1"], row["ratio_later"] = e1, later
            tuned = ""
            if "tuned" in row:
                tuned = f"  tuned e1 {row['tuned'][0] / own[0]:.2f}x e2+ {_later(row['tuned']) / _later(own):.2f}x"
            print(
                f"{name:<11} {workers:>1}  {own[0]:7.1f} {_later(own):7.1f}  {plan[0]:7.1f} "
                f"{_later(plan):8.1f}  {e1:5.2f} {later:6.2f}  {'yes' if row['identical'] else 'NO':<4} "
                f"{row['ram_mb']:7.1f} {row['budget_mb']:7.0f}  {row['cut']}{tuned}",
                flush=True,
            )
    for workers in args.workers:
        chosen = [r for r in rows if r["workers"] == workers]
        g1 = math.exp(statistics.fmean(math.log(r["ratio_e1"]) for r in chosen))
        g2 = math.exp(statistics.fmean(math.log(r["ratio_later"]) for r in chosen))
        print(
            f"geometric mean, {workers} workers: epoch 1 {g1:.2f}x, epochs 2+ {g2:.2f}x (samples/s, plan / own)"
        )


if __name__ == "__main__":
    main()
