"""What applying and restoring a plan costs, with few and with many modules imported, side by side.

Applying a plan finds the references other modules bound to each planned function (``from cv2
import resize``) by reading every module namespace, and restoring sweeps them again; that cost
grows with the modules a process has imported (a training script with lightning, ray and mlflow
holds thousands). Each variant runs in its own interpreter: ``plain`` (codedag, torch, NumPy,
cv2) and ``heavy`` (also ``--heavy`` modules: those of them installed). Each traces the
``--pipeline`` example, makes its plan (placements through torch on the CPU, batched chains,
prefix cache, tables), then applies and restores it ``--repeats`` times and prints the median
time, the module count and the reference scans per apply and sweeps per restore (what decides
it). It measures; it asserts nothing. Run::

    python benchmarks/apply_cost.py [--pipeline demo_image] [--repeats 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

HEAVY = ("scipy.signal", "sklearn.linear_model", "lightning", "mlflow", "ray", "librosa")


def measure(pipeline: str, repeats: int, heavy: bool) -> dict[str, Any]:
    """One variant, in this process."""
    import importlib
    import warnings

    warnings.filterwarnings("ignore")
    imported = []
    for name in HEAVY if heavy else ():
        try:
            importlib.import_module(name)
            imported.append(name)
        except ImportError:
            continue
    import codedag.patching as patching
    from codedag.experiments import pipelines
    from codedag.migrate.api import PipelineMigrator
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace import trace_dataloader

    tracer, _ = trace_dataloader(pipelines.make_loader(pipeline, n=8, batch_size=4))
    manager = OptimizerManager(k=1, target_device="cpu", batched="always", calibrate=False)
    plan = manager.optimize(tracer.dag)["migration_plan"]
    counts = {"scans": 0, "sweeps": 0}
    scan, sweep = patching.reference_sites, patching.sweep_modules

    def counted_scan(*args: Any) -> Any:
        counts["scans"] += 1
        return scan(*args)

    def counted_sweep(*args: Any) -> Any:
        counts["sweeps"] += 1
        return sweep(*args)

    patching.reference_sites, patching.sweep_modules = counted_scan, counted_sweep  # type: ignore[assignment]
    times = []
    for _ in range(repeats):
        migrator = PipelineMigrator(plan, guard=False)
        started = time.perf_counter()
        migrator.apply()
        migrator.restore()
        times.append(time.perf_counter() - started)
    return {
        "modules": len(sys.modules),
        "imported": imported,
        "apply_restore_ms": 1000 * statistics.median(times),
        "scans_per_apply": counts["scans"] / repeats,
        "sweeps_per_restore": counts["sweeps"] / repeats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", default="demo_image")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--variant", choices=("plain", "heavy"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.variant:
        print(json.dumps(measure(args.pipeline, args.repeats, args.variant == "heavy")))
        return 0
    rows = {}
    for variant in ("plain", "heavy"):
        command = [sys.executable, __file__, "--variant", variant, "--pipeline", args.pipeline]
        done = subprocess.run(
            [*command, "--repeats", str(args.repeats)], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(f"{variant}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"apply + restore of the {args.pipeline} plan, median of {args.repeats}")
    print(f"{'variant':8} {'modules':>8} {'ms':>8} {'scans/apply':>12} {'sweeps/restore':>15}")
    for name, row in rows.items():
        print(
            f"{name:8} {row['modules']:8d} {row['apply_restore_ms']:8.1f} "
            f"{row['scans_per_apply']:12.1f} {row['sweeps_per_restore']:15.1f}"
        )
    ratio = rows["heavy"]["apply_restore_ms"] / rows["plain"]["apply_restore_ms"]
    print(f"heavy / plain: {ratio:.2f}x (imported: {', '.join(rows['heavy']['imported'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
