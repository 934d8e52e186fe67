"""Conformance on a peer's test suite: every library call its tests make, shadow-compared.

A pytest plugin. For the session it wraps every library function codedag has a backend for
(cv2, NumPy, PIL, librosa: the registry's names; torch's own functions are their own backends and
are left alone). A wrapped call runs the original, whose result (or exception) is what the test
gets, so the peer's tests pass or fail as they would without codedag. Then, on copies of the same
arguments (same values, dtypes, shapes and memory layout: strides, offsets, zero strides,
read-only flags), the conformance check of codedag's own suite runs the call through the
migrated path on the CPU and through the library: ``migrate_support.conform`` from
``tests/support`` (the op's admission, its declared tolerance, dtype, shape, C/F contiguity and
zero strides, inputs left unwritten, no memory shared with an input where the library's result
shares none). Calls made while a wrapped call runs (the library's own, the comparison's) go
straight to the original, and so do the calls of forked children (their counts would be lost, and
torch's thread pools may not survive a fork).

At the session's end it writes ``peer_conformance.json`` and ``peer_conformance.md`` to
``--peer-report`` (default ``peer_conformance/``): calls compared per function and outcome,
differences by function and kind (beyond tolerance, layout, backend error, mismatch) with up to
``--peer-examples`` reproducers each (the test, the arguments' types, dtypes, shapes and layouts,
the detail with the worst difference, and the arguments pickled), the admission's refusals per
reason, and the tests' outcomes.

Usage (albumentations 2.0.8 and its tests: see ``docs/migration.md``)::

    PYTHONPATH=/path/to/codedag/benchmarks python -m pytest -p peer_conformance tests/... \\
        -q -p no:cacheprovider --timeout 300 --junitxml with.xml --peer-report /tmp/peer

``python benchmarks/peer_conformance.py outcomes base.xml with.xml`` compares the tests' outcomes
of two runs (junit XML files): the run without the plugin and the run with it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pickle
import sys
import threading
import time
import warnings
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
OUTCOMES = ("identical", "tolerance", "unsupported", "exception", "differs", "repeats")
KINDS = ("beyond tolerance", "layout", "backend error", "mismatch", "harness error")
"""What a failed comparison was: values beyond the declared tolerance; C/F contiguity or zero
strides; the backend raised where the library did not (a migrated call falls back); another
difference (types, shapes, dtypes, an input written, memory shared); the comparison itself
failed."""


def kind_of(detail: str) -> str:
    """The kind of a failed comparison, from ``conform``'s detail."""
    if "hidden by the fallback" in detail:
        return "backend error"
    if ": layout " in detail:
        return "layout"
    if "beyond atol" in detail or "differ" in detail or "NaN at" in detail:
        return "beyond tolerance"
    return "mismatch"


# -- copies that keep the layout ----------------------------------------------------------------


def _clone_array(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` with its strides (views, reversed axes, zero strides) and flags."""
    if type(a) is not np.ndarray:
        return copy.deepcopy(a)
    if a.size == 0 or a.ndim == 0 or a.dtype.hasobject:
        out = a.copy(order="K")
    else:
        low = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
        high = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0) + a.itemsize
        buffer = np.empty(high - low, np.uint8)
        out = np.ndarray(a.shape, a.dtype, buffer=buffer, offset=-low, strides=a.strides)
        np.copyto(out, a)
    out.flags.writeable = bool(a.flags.writeable)
    return out


def clone(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of a call's arguments: arrays as :func:`_clone_array`, containers rebuilt, PIL
    images copied, anything else (scalars, flags, callables) as it is. An object appearing
    twice is copied once."""
    memo = {} if memo is None else memo
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, np.ndarray):
        out: Any = _clone_array(value)
    elif type(value) is list:
        out = [clone(v, memo) for v in value]
    elif type(value) is tuple:
        out = tuple(clone(v, memo) for v in value)
    elif type(value) is dict:
        out = {k: clone(v, memo) for k, v in value.items()}
    elif type(value).__module__.startswith("PIL.") and hasattr(value, "copy"):
        out = value.copy()
    else:
        out = value
    memo[key] = out
    return out


def describe(value: Any, depth: int = 0) -> str:
    """A short description of an argument: arrays by dtype, shape and layout."""
    from migrate_support import layout_of

    if isinstance(value, np.ndarray):
        flags = "/".join(layout_of(value)) + ("" if value.flags.writeable else " read-only")
        return f"ndarray {value.dtype} {value.shape} {flags}"
    if isinstance(value, list | tuple) and depth < 2:
        items = ", ".join(describe(v, depth + 1) for v in value[:4])
        more = f", ... ({len(value)})" if len(value) > 4 else ""
        return f"{type(value).__name__}[{items}{more}]"
    if isinstance(value, dict) and depth < 2:
        return "{" + ", ".join(f"{k!r}: {describe(v, depth + 1)}" for k, v in value.items()) + "}"
    if type(value).__module__.startswith("PIL.") and hasattr(value, "mode"):
        return f"PIL {value.mode} {getattr(value, 'size', '?')}"
    text = repr(value)
    if text.startswith("<") and hasattr(value, "__dict__"):  # the fields of a filter object
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(value).items())
        text = f"{type(value).__name__}({fields})"
    return text if len(text) <= 80 else text[:77] + "..."


_PLAIN = (int, str, bool, bytes, type(None))
SMALL = 64
"""Arrays of at most this many elements are alike only with the same values."""
PER_FUNCTION = 100
"""With a bound on repeats, calls compared per function: that many times the bound (a loop over
pixels calling ``numpy.sum`` on small arrays of new values would make every call new)."""


def call_key(value: Any, depth: int = 0) -> Any:
    """What makes calls alike: arrays by dtype, shape and layout (small ones by their values as
    well), floats by type, other values (flags, sizes) as they are. Cheap: it runs on every wrapped call."""
    kind = type(value)
    if kind is np.ndarray:
        flags = value.flags
        zero = 0 in value.strides and value.size > 0
        layout = (flags.c_contiguous, flags.f_contiguous, zero, flags.writeable)
        # small arrays (kernels, matrices) by their values as well
        values = value.tobytes() if value.size <= SMALL and not value.dtype.hasobject else None
        return (value.dtype.str, value.shape, layout, values)
    if kind in _PLAIN:
        return value
    if kind is float or isinstance(value, np.floating):
        return kind.__name__
    if (kind is list or kind is tuple) and depth < 3:
        return (kind.__name__, len(value), *[call_key(v, depth + 1) for v in value[:8]])
    if kind is dict and depth < 3:
        return tuple(sorted((str(k), call_key(v, depth + 1)) for k, v in value.items()))
    if isinstance(value, np.integer | np.bool_):
        return value
    return kind.__name__


# -- the shadow comparison ----------------------------------------------------------------------


class Shadow:
    """Counts, differences and refusals of the shadow-compared calls of one session.

    Args:
        report_dir: where the JSON and markdown summaries go.
        examples: reproducers kept per function and kind of difference.
        repeats: calls compared per function and :func:`call_key` (0: all), and at most
            ``PER_FUNCTION`` times as many per function; the others count as ``repeats``.
    """

    def __init__(self, report_dir: Path, examples: int = 3, repeats: int = 0) -> None:
        self.report_dir = report_dir
        self.examples = examples
        self.repeats = repeats
        self.seen: Counter[Any] = Counter()
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.refused: dict[str, Counter[str]] = defaultdict(Counter)
        self.found: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.tests: Counter[str] = Counter()
        self.test = ""
        self.seconds = 0.0
        self._local = threading.local()

    @property
    def busy(self) -> bool:
        """Whether this thread is inside a wrapped call (its calls go to the original)."""
        return getattr(self._local, "busy", False)

    def wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """The replacement of ``original``: the original's result, then the comparison."""
        from codedag.migrate.proxy import ufunc_proxy
        from codedag.patching import like_original

        local = self._local
        compare = self.compare
        pid = os.getpid()

        def replacement(*args: Any, **kwargs: Any) -> Any:
            if getattr(local, "busy", False) or os.getpid() != pid:
                return original(*args, **kwargs)
            local.busy = True
            try:
                snapshot = self.snapshot(name, args, kwargs)
                try:
                    return original(*args, **kwargs)
                finally:
                    if snapshot is not None:
                        compare(name, snapshot)
            finally:
                local.busy = False

        like_original(replacement, original)
        if type(original).__name__ == "ufunc":
            return ufunc_proxy(replacement, original, self, name.rsplit(".", 1)[0])
        return replacement

    def snapshot(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A copy of the arguments before the original runs (it may write into them); None for
        a call not compared (a repeat, or arguments that cannot be copied)."""
        try:
            if self.repeats:
                key = (name, call_key(args), call_key(kwargs))
                self.seen[key] += 1
                compared = self.seen[name]
                if self.seen[key] > self.repeats or compared >= self.repeats * PER_FUNCTION:
                    self.counts[name]["calls"] += 1
                    self.counts[name]["repeats"] += 1
                    return None
                self.seen[name] += 1
            with _quiet():
                return clone((args, kwargs))
        except Exception as error:  # an argument that cannot be copied: not compared
            self.counts["(arguments not copied)"][type(error).__name__] += 1
            return None

    def compare(self, name: str, snapshot: Any) -> None:
        """Run ``conform`` on fresh copies of the arguments and record the outcome."""
        from migrate_support import conform

        start = time.perf_counter()
        try:
            with _quiet(), _random_states_kept(name):
                outcome, detail = conform(name, lambda: clone(snapshot), "cpu")
        except Exception as error:
            outcome, detail = "failed", f"harness error {type(error).__name__}: {error}"[:300]
        self.seconds += time.perf_counter() - start
        self.counts[name]["calls"] += 1
        if outcome == "unsupported":
            self.refused[name][detail] += 1
        if outcome != "failed":
            self.counts[name][outcome] += 1
            return
        kind = "harness error" if detail.startswith("harness error") else kind_of(detail)
        self.counts[name][kind] += 1
        found = self.found[(name, kind)]
        if len(found) < self.examples:
            found.append(self._example(name, kind, len(found), detail, snapshot))

    def _example(self, name: str, kind: str, n: int, detail: str, snapshot: Any) -> dict[str, Any]:
        args, kwargs = snapshot
        example = {
            "test": self.test,
            "detail": detail,
            "args": [describe(a) for a in args],
            "kwargs": {k: describe(v) for k, v in kwargs.items()},
        }
        path = self.report_dir / "cases" / f"{name}.{kind.replace(' ', '_')}.{n}.pkl"
        try:
            data = pickle.dumps({"function": name, "args": args, "kwargs": kwargs})
        except Exception:  # unpicklable arguments: the description is the reproducer
            return example
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        example["case"] = str(path)
        return example

    # -- summaries ------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Everything recorded, as JSON-ready data."""
        totals: Counter[str] = Counter()
        for counts in self.counts.values():
            totals.update(counts)
        return {
            "tests": dict(self.tests),
            "totals": dict(totals),
            "compare_seconds": round(self.seconds, 1),
            "functions": {n: dict(c) for n, c in sorted(self.counts.items())},
            "differences": [
                {"function": n, "kind": k, "calls": self.counts[n][k], "examples": e}
                for (n, k), e in sorted(self.found.items())
            ],
            "refused": {n: dict(c.most_common()) for n, c in sorted(self.refused.items())},
        }

    def write(self) -> list[Path]:
        """Write ``peer_conformance.json`` and ``.md``; their paths."""
        self.report_dir.mkdir(parents=True, exist_ok=True)
        data = self.summary()
        js = self.report_dir / "peer_conformance.json"
        js.write_text(json.dumps(data, indent=1, default=str) + "\n")
        md = self.report_dir / "peer_conformance.md"
        md.write_text("\n".join(markdown(data)) + "\n")
        return [js, md]


def markdown(data: dict[str, Any]) -> list[str]:
    """The markdown summary of :meth:`Shadow.summary`'s data."""
    tests = ", ".join(f"{n} {k}" for k, n in sorted(data["tests"].items())) or "none"
    totals = data["totals"]
    lines = [
        "# Peer suite conformance",
        "",
        f"Tests: {tests}. Calls: {totals.get('calls', 0)}, compared: "
        f"{totals.get('calls', 0) - totals.get('repeats', 0)} ({data['compare_seconds']} s).",
        "",
        "| function | calls | " + " | ".join(OUTCOMES + KINDS) + " |",
        "|---|---:|" + "---:|" * (len(OUTCOMES) + len(KINDS)),
    ]
    for name, counts in data["functions"].items():
        cells = " | ".join(str(counts.get(k, 0)) for k in OUTCOMES + KINDS)
        lines.append(f"| `{name}` | {counts.get('calls', 0)} | {cells} |")
    lines += ["", "## Differences", ""]
    for found in data["differences"]:
        lines.append(f"### `{found['function']}`: {found['kind']} ({found['calls']} calls)")
        for ex in found["examples"]:
            args = ", ".join(ex["args"] + [f"{k}={v}" for k, v in ex["kwargs"].items()])
            lines += ["", f"- test `{ex['test']}`", f"  - arguments: {args}"]
            lines.append(f"  - {ex['detail']}")
            if "case" in ex:
                lines.append(f"  - pickled: `{ex['case']}`")
        lines.append("")
    if not data["differences"]:
        lines.append("None.")
    lines += ["", "## Refused by admission", ""]
    for name, reasons in data["refused"].items():
        for reason, n in reasons.items():
            lines.append(f"- `{name}` x{n}: {reason}")
    return lines


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No warning and no floating-point error of the comparison reaches the test."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _random_states_kept(name: str) -> Iterator[None]:
    """NumPy's and torch's global random states as they were: re-running a random draw (the
    library's, the backend's) must not change what the peer's next draw gives."""
    if not name.startswith("numpy.random."):
        yield
        return
    import torch

    state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            np.random.set_state(state)


# -- the pytest plugin --------------------------------------------------------------------------


_ACTIVE: list[tuple[Shadow, Any]] = []
"""The session's shadow and patcher (one pytest session per process)."""


def pytest_addoption(parser: Any) -> None:
    """The plugin's options."""
    group = parser.getgroup("peer_conformance", "shadow comparison with codedag's backends")
    group.addoption("--peer-report", default="peer_conformance", help="summary directory")
    group.addoption(
        "--peer-libraries",
        default="cv2,numpy,PIL,librosa",
        help="comma-separated libraries whose registry functions are wrapped",
    )
    group.addoption("--peer-examples", type=int, default=3, help="reproducers per difference")
    group.addoption(
        "--peer-repeats",
        type=int,
        default=0,
        help="calls compared per function and kind of arguments (0: all)",
    )


def pytest_configure(config: Any) -> None:
    """Wrap the registry's functions of the chosen libraries for the session."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    config.addinivalue_line("markers", "gpu: codedag's marker (its test helpers use it)")
    from codedag.backends.registry import default_registry
    from codedag.patching import Patcher

    libraries = {s.strip() for s in config.getoption("peer_libraries").split(",") if s.strip()}
    names = sorted(n for n in default_registry().names() if n.split(".", 1)[0] in libraries)
    shadow = Shadow(
        Path(config.getoption("peer_report")),
        config.getoption("peer_examples"),
        config.getoption("peer_repeats"),
    )
    patcher = Patcher("peer_conformance")
    patcher.patch_many(names, shadow.wrap)
    _ACTIVE.append((shadow, patcher))


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """The running test, named in reproducers."""
    for shadow, _patcher in _ACTIVE:
        shadow.test = nodeid


def pytest_runtest_logreport(report: Any) -> None:
    """The tests' outcomes (a test counts as failed or error once)."""
    for shadow, _patcher in _ACTIVE:
        if report.when == "call" or report.outcome != "passed":
            outcome = "error" if report.when != "call" and report.failed else report.outcome
            shadow.tests[outcome] += 1


def pytest_sessionfinish(session: Any) -> None:
    """Put the originals back and write the summaries."""
    if not _ACTIVE:
        return
    shadow, patcher = _ACTIVE.pop()
    patcher.restore()
    paths = shadow.write()
    totals = shadow.summary()["totals"]
    found = sum(totals.get(k, 0) for k in KINDS)
    compared = totals.get("calls", 0) - totals.get("repeats", 0)
    line = f"peer conformance: {compared} calls compared, {found} differ; " + ", ".join(
        str(p) for p in paths
    )
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


# -- outcomes of two runs -----------------------------------------------------------------------


def junit_outcomes(path: Path) -> dict[str, str]:
    """Each test's outcome in a junit XML file: passed, failed, error or skipped."""
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        outcome = next((t for t in ("failure", "error", "skipped") if t in tags), "passed")
        outcomes[test] = {"failure": "failed"}.get(outcome, outcome)
    return outcomes


def main(argv: list[str]) -> int:
    """``outcomes BASE.xml WITH.xml``: the outcomes of two runs side by side; 1 when they differ."""
    if len(argv) != 3 or argv[0] != "outcomes":
        print("usage: peer_conformance.py outcomes BASE.xml WITH.xml", file=sys.stderr)
        return 2
    try:
        base, other = (junit_outcomes(Path(p)) for p in argv[1:])
    except (OSError, ET.ParseError) as error:
        print(f"peer_conformance: cannot read {error}", file=sys.stderr)
        return 2
    for label, runs in (("without", base), ("with", other)):
        counts = Counter(runs.values())
        print(f"{label} the plugin: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    changed = sorted(t for t in base.keys() | other.keys() if base.get(t) != other.get(t))
    for test in changed:
        print(f"  {test}: {base.get(test, 'absent')} -> {other.get(test, 'absent')}")
    print(f"{len(changed)} tests changed outcome")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
