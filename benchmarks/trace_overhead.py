"""Tracer overhead and time accuracy, side by side in one run, against the tracer's goals.

Workloads:
  (a) cv2 image pipeline: 64 images 512x512x3 uint8 -> resize 256x256, cvtColor, GaussianBlur,
      normalize to float32 [0, 1];
  (b) call-heavy pure-Python pipeline: ~200k small function calls;
  (c) with --loaders (needs torch): codedag's example DataLoaders (letterbox, compose,
      yolo_mosaic), one batch of 16 with num_workers=0 and a new tracer per batch, as
      trace_dataloader runs them.
Modes: untraced, codedag (memory off/on, line-level dataflow on/off), an empty window (fixed
cost), wrappers kept installed, cProfile. Goals: (a) at most 1.5x, window cost included, and a
recorded time within 1.1x of the untraced time; (b) a recorded time within 1.3x.
Also: CPU cost per recorded call, memory per 1e5 nodes, save/load of a 1e6-node DAG.

Run: .venv/bin/python benchmarks/trace_overhead.py [--repeats 3] [--dag-nodes 1000000] [--loaders]
Python 3.12+ (sys.monitoring): PYTHONPATH=src .venv312/bin/python benchmarks/trace_overhead.py
Each time is the best of --repeats runs, the modes interleaved. Ratios are traced / untraced time
of the same workload; CPU ratios (this thread's CPU time) are steadier on a loaded machine.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from codedag.graph import ExecutionDAG
from codedag.trace import EnhancedTracer
from codedag.trace.overhead import calibration

cv2.setNumThreads(1)


def make_images(n: int = 64, size: int = 512) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 255, (size, size, 3), dtype=np.uint8) for _ in range(n)]


def cv2_pipeline(images: list[np.ndarray]) -> list[np.ndarray]:
    out = []
    for img in images:
        small = cv2.resize(img, (256, 256), interpolation=cv2.INTER_LINEAR)
        rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
        blurred = cv2.GaussianBlur(rgb, (5, 5), 0)
        out.append(cv2.normalize(blurred, None, 0.0, 1.0, cv2.NORM_MINMAX, dtype=cv2.CV_32F))
    return out


def tokenize(i: int) -> int:
    return i % 97


def scale(x: int) -> int:
    return x * 3 + 1


def clip(x: int) -> int:
    return x if x < 200 else 200


def sample(i: int) -> int:
    return clip(scale(tokenize(i)))


def python_pipeline(n: int = 50_000) -> int:
    """4 calls per iteration: 200k calls for n=50k."""
    total = 0
    for i in range(n):
        total += sample(i)
    return total


def best_of(repeats: int, fn: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def traced(track_memory: bool, fn: Callable[[], Any], **options: Any) -> Callable[[], Any]:
    """A traced run; keeps the DAG and the least recorded time of the outermost call."""

    def run() -> Any:
        tracer = EnhancedTracer(track_memory=track_memory, **options)
        with tracer.tracing_context():
            fn()
        run.dag = tracer.dag  # type: ignore[attr-defined]
        recorded = sum(n.total_ns for n in tracer.dag.calls() if n.depth == 0) / 1e9
        run.recorded = min(getattr(run, "recorded", recorded), recorded)  # type: ignore[attr-defined]

    return run


class KeptWrappers:
    """A traced run (track_memory=False) whose library wrappers stay installed between runs."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.tracer = EnhancedTracer(track_memory=False)

    def run(self) -> None:
        with self.tracer.tracing_context():
            self.fn()
        self.run.__func__.dag = self.tracer.dag  # type: ignore[attr-defined]


def profiled(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> None:
        prof = cProfile.Profile()
        prof.enable()
        try:
            fn()
        finally:
            prof.disable()

    return run


def _timed(run: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU time of ``run()``, after one untimed run of the same mode: the allocator's
    state (pages mapped, heap trimmed) then comes from this mode, not from the one before."""
    run()
    gc.collect()
    c0, t0 = time.thread_time(), time.perf_counter()
    run()
    return time.perf_counter() - t0, time.thread_time() - c0


def compare(name: str, fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Run every mode ``repeats`` times, interleaved, and keep each mode's best time.

    Interleaving spreads the load of a shared machine over all modes alike. Wall-clock and CPU
    time (this thread) are both kept: on a loaded machine the CPU ratios are the steadier ones.
    Returns the figures the goals are judged on.
    """
    kept = KeptWrappers(fn)
    modes: list[tuple[str, Callable[[], Any]]] = [
        ("untraced", fn),
        ("codedag, track_memory=False", traced(False, fn)),
        ("codedag, track_memory=True", traced(True, fn)),
        ("codedag, no line-level dataflow", traced(False, fn, line_level=False)),
        ("codedag window, empty body", traced(False, lambda: None)),
        ("codedag, wrappers kept", kept.run),
        ("cProfile", profiled(fn)),
    ]
    fn()  # warm: first-call costs (imports, caches) are not what is measured
    best = {label: (float("inf"), float("inf")) for label, _ in modes}
    for _ in range(repeats):
        for label, run in modes:
            if run is kept.run:  # wrappers installed outside the timed region
                with kept.tracer.wrappers_kept():
                    wall, cpu = _timed(run)
            else:
                wall, cpu = _timed(run)
            best[label] = (min(best[label][0], wall), min(best[label][1], cpu))
    base_wall, base_cpu = best["untraced"]
    print(f"\n({name})")
    print(f"  {'mode':34s} {'wall s':>9s} {'ratio':>7s} {'cpu s':>9s} {'ratio':>7s} {'nodes':>8s}")
    for label, run in modes:
        wall, cpu = best[label]
        dag = getattr(run, "dag", None)
        nodes = len(dag.nodes) if dag is not None else ""
        print(
            f"  {label:34s} {wall:9.4f} {wall / base_wall:7.2f} {cpu:9.4f} {cpu / base_cpu:7.2f}"
            f" {nodes!s:>8s}"
        )
    figures: dict[str, float] = {
        "overhead_wall": best["codedag, track_memory=False"][0] / base_wall,
        "overhead_cpu": best["codedag, track_memory=False"][1] / base_cpu,
        "overhead_memory_wall": best["codedag, track_memory=True"][0] / base_wall,
        "lines_cpu": best["codedag, track_memory=False"][1]
        / best["codedag, no line-level dataflow"][1],
        "cprofile_wall": best["cProfile"][0] / base_wall,
    }
    for label, key in (
        ("codedag, track_memory=False", "recorded"),
        ("codedag, track_memory=True", "recorded_memory"),
    ):
        run = modes[[m[0] for m in modes].index(label)][1]
        dag, recorded = run.dag, run.recorded  # type: ignore[attr-defined]
        figures[key] = recorded / base_wall
        print(
            f"  {label:34s} recorded time of the outermost call (tracer cost subtracted, "
            f"least of the runs): {recorded:.4f} s = {recorded / base_wall:.2f}x untraced"
        )
        meta = dag.metadata["tracer"]
        if meta.get("pruned") or meta.get("lines_stopped"):
            print(
                f"    no longer recorded after {meta['prune_after']} data-free calls: "
                f"{meta['pruned']}; statements no longer followed: {meta['lines_stopped']}"
            )
    return figures


def _within(ratio: float, limit: float) -> bool:
    return 1 / limit <= ratio <= limit


def goals(a: dict[str, float], b: dict[str, float]) -> None:
    """The goals of the tracer next to this run's figures."""
    rows = [
        ("(a) cv2: traced / untraced, window included", a["overhead_wall"], "<= 1.50x",
         a["overhead_wall"] <= 1.5),
        ("(a) cv2: same, CPU time", a["overhead_cpu"], "<= 1.50x", a["overhead_cpu"] <= 1.5),
        ("(a) cv2: recorded / untraced time", a["recorded"], "within 1.10x",
         _within(a["recorded"], 1.1)),
        ("(a) cv2: same, track_memory=True", a["recorded_memory"], "within 1.10x",
         _within(a["recorded_memory"], 1.1)),
        ("(b) Python: recorded / untraced time", b["recorded"], "within 1.30x",
         _within(b["recorded"], 1.3)),
        ("(b) Python: same, track_memory=True", b["recorded_memory"], "within 1.30x",
         _within(b["recorded_memory"], 1.3)),
        ("(b) Python: traced / untraced", b["overhead_wall"],
         f"(cProfile {b['cprofile_wall']:.1f}x)", None),
        ("line-level dataflow cost (a), CPU on / off", a["lines_cpu"], "measured", None),
        ("line-level dataflow cost (b), CPU on / off", b["lines_cpu"], "measured", None),
    ]  # fmt: skip
    print("\nGoals")
    print(f"  {'figure':46s} {'measured':>9s}  {'goal':16s} met")
    for label, value, goal, met in rows:
        verdict = "" if met is None else ("yes" if met else "NO")
        print(f"  {label:46s} {value:8.2f}x  {goal:16s} {verdict}")


def tiny_resize_loop(n: int, img: np.ndarray) -> None:
    for _ in range(n):
        cv2.resize(img, (2, 2))


def per_call_costs() -> None:
    """CPU time (process_time, best of 5) per recorded call and per window: less load-sensitive."""

    def cpu(fn: Callable[[], Any]) -> float:
        best = float("inf")
        for _ in range(5):
            t0 = time.process_time()
            fn()
            best = min(best, time.process_time() - t0)
        return best

    img = np.zeros((4, 4, 3), np.uint8)
    n = 5000
    base = cpu(lambda: tiny_resize_loop(n, img))
    print("\nCPU time per recorded call (process_time, best of 5):")
    for memory in (False, True):
        tracer = EnhancedTracer(track_memory=memory)
        with tracer.wrappers_kept():

            def run(tracer: EnhancedTracer = tracer) -> None:
                tracer.start()
                tiny_resize_loop(n, img)
                tracer._session.stop()  # window only: the DAG build is measured separately
                tracer._session = None
                tracer._patcher = None

            t = cpu(run)
        print(
            f"  wrapped cv2.resize on a 4x4 image, track_memory={memory}: "
            f"{(t - base) / n * 1e6:.1f} us tracer cost per call ({base / n * 1e6:.1f} us untraced)"
        )
    base = cpu(lambda: python_pipeline(20_000))
    tracer = EnhancedTracer(track_memory=False, prune_after=None)
    t = cpu(lambda: tracer.trace(python_pipeline, 20_000))
    print(
        f"  recorded pure-Python call (prune_after=None), window and DAG build included: "
        f"{(t - base) / 80_000 * 1e6:.2f} us"
    )
    tracer = EnhancedTracer(track_memory=False)
    t = cpu(lambda: tracer.trace(python_pipeline, 20_000))
    print(
        f"  pure-Python call with data-free functions pruned (the default): "
        f"{(t - base) / 80_000 * 1e6:.2f} us"
    )
    tracer = EnhancedTracer(track_memory=False)
    t = cpu(lambda: tracer.trace(lambda: None))
    print(
        f"  fixed cost of a window (wrappers installed and removed, empty body): {t * 1e3:.1f} ms"
    )
    with tracer.wrappers_kept():
        t = cpu(lambda: tracer.trace(lambda: None))
    print(f"  fixed cost of a window inside wrappers_kept(): {t * 1e3:.2f} ms")


def memory_per_nodes() -> None:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracer = EnhancedTracer(track_memory=False, prune_after=None)  # every call a node
    with tracer.tracing_context():
        python_pipeline(25_000)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    n = len(tracer.dag.nodes)
    print(f"\npeak memory while tracing and building: {peak / 2**20:.1f} MiB for {n} nodes")
    print(f"  = {peak / n * 1e5 / 2**20:.1f} MiB per 1e5 nodes (records + DAG)")


def synthetic_dag(n_nodes: int) -> ExecutionDAG:
    dag = ExecutionDAG(metadata={"synthetic": True})
    parent = dag.add_call(name="pipeline", context_key="pipeline#0", total_ns=10**12, self_ns=10)
    prev = None
    for i in range((n_nodes - 1) // 2):
        call = dag.add_call(
            name="cv2.resize",
            context_key=f"pipeline#0/cv2.resize#{i}",
            call_site="pipeline.py:12",
            depth=1,
            total_ns=1000,
            self_ns=1000,
            mem_bytes=4096,
            arg_summaries=["ndarray[512,512,3] uint8", "tuple[2]"],
            return_summary="ndarray[256,256,3] uint8",
            is_builtin=True,
        )
        dag.add_edge(parent, call, "calls")
        if prev is not None:
            dag.add_edge(prev, call, "uses")
        value = dag.add_value(
            name="ndarray",
            type_name="numpy.ndarray",
            shape=[256, 256, 3],
            dtype="uint8",
            nbytes=196608,
        )
        dag.add_edge(call, value, "produces")
        prev = value
    return dag


def save_load(n_nodes: int) -> None:
    dag = synthetic_dag(n_nodes)
    with tempfile.TemporaryDirectory() as folder:
        for name in ("dag.json", "dag.json.gz"):
            path = Path(folder) / name
            t0 = time.perf_counter()
            dag.save(path)
            t_save = time.perf_counter() - t0
            size = os.path.getsize(path)
            t0 = time.perf_counter()
            loaded = ExecutionDAG.load(path)
            t_load = time.perf_counter() - t0
            assert len(loaded.nodes) == len(dag.nodes)
            print(
                f"  {name:12s} {len(dag.nodes)} nodes, {len(dag.edges)} edges: save {t_save:.2f} s, "
                f"load {t_load:.2f} s, {size / 2**20:.0f} MiB"
            )
        t0 = time.perf_counter()
        dag.self_check()
        print(f"  self_check: {time.perf_counter() - t0:.2f} s")


def loader_batches(repeats: int) -> None:
    """(c) traced / untraced CPU time of one batch of each example loader (paired runs)."""
    try:
        from codedag.experiments import pipelines
    except ImportError as error:  # torch is not installed
        print(f"\n(c) loaders: unavailable ({error})")
        return
    sizes = {"letterbox": {"img_size": 256}, "compose": {"img_size": 224}}
    sizes["yolo_mosaic"] = {"img_size": 320}
    print("\n(c) example loaders, one batch of 16, CPU time (median of paired runs):")
    print(f"  {'loader':12s} {'untraced s':>10s} {'traced s':>9s} {'ratio':>6s} {'nodes':>6s}")
    for name, options in sizes.items():
        loader = pipelines.make_loader(name, batch_size=16, num_workers=0, **options)

        def batch(loader: Any = loader) -> Any:
            return next(iter(loader))

        run = traced(False, batch)
        batch()
        run()
        untraced_s, traced_s, ratios = [], [], []
        for i in range(3 * repeats):
            pair = (batch, run) if i % 2 == 0 else (run, batch)
            times = {}
            for fn in pair:
                times[fn] = _timed(fn)[1]
            untraced_s.append(times[batch])
            traced_s.append(times[run])
            ratios.append(times[run] / times[batch])
        nodes = len(run.dag.nodes)  # type: ignore[attr-defined]
        print(
            f"  {name:12s} {statistics.median(untraced_s):10.4f} "
            f"{statistics.median(traced_s):9.4f} {statistics.median(ratios):6.2f} {nodes:6d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="(a) runs twice as many")
    parser.add_argument("--dag-nodes", type=int, default=1_000_000)
    parser.add_argument("--loaders", action="store_true", help="also (c): the example loaders")
    args = parser.parse_args()
    source = "sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile"
    print(
        f"python {sys.version.split()[0]} ({source}), numpy {np.__version__}, "
        f"cv2 {cv2.__version__}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    t0 = time.perf_counter()
    for memory in (False, True):
        cal = calibration(memory, line_level=True)
    print(f"calibration (both memory settings, once per process): {time.perf_counter() - t0:.3f} s")
    print(f"  per-event costs subtracted (track_memory=True), ns: {cal.to_dict()}")
    images = make_images()
    a = compare(
        "a: cv2 pipeline, 64 images 512x512", lambda: cv2_pipeline(images), 2 * args.repeats
    )
    b = compare("b: pure-Python pipeline, 200k calls", python_pipeline, args.repeats)
    goals(a, b)
    if args.loaders:
        loader_batches(args.repeats)
    per_call_costs()
    memory_per_nodes()
    print(f"\nsave/load of a {args.dag_nodes}-node DAG:")
    save_load(args.dag_nodes)


if __name__ == "__main__":
    main()
