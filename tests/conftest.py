"""Shared fixtures and markers: gpu tests skip without CUDA. The helper modules of every test
folder live in ``tests/support`` and import by their bare names (``from migrate_support import
...``); the conformance counts are printed at the end of a session."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent / "support"))

import hypothesis_profiles  # from tests/support, just put on the path

# CI explores a fixed set of examples, so a run is repeatable; local runs keep exploring, and
# HYPOTHESIS_PROFILE=nightly explores many more. Loaded before any test module creates its own
# settings objects, which inherit from the profile loaded at their creation.
# A suite started in the background of a shell without job control inherits SIGINT ignored, and
# so would every script its tests start: the tests of Ctrl-C would then wait for an interrupt
# that never comes. Ctrl-C is what they test, so it is given back its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

hypothesis_profiles.register()
_PROFILE = hypothesis_profiles.chosen(os.environ)
try:
    settings.load_profile(_PROFILE)
except Exception as e:  # hypothesis's InvalidArgument: an unknown profile name
    raise pytest.UsageError(
        f"{hypothesis_profiles.PROFILE_ENV}={_PROFILE!r}: expected ci, nightly or default"
    ) from e


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _require_deterministic_examples(items)
    from codedag.devices.torch_devices import cuda_available

    if cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA (none available here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _require_deterministic_examples(items: list[pytest.Item]) -> None:
    """Under the ci profile every hypothesis test draws a fixed set of examples: a test whose own
    settings re-enable randomness or an example database stops the run before it starts."""
    if settings.get_current_profile_name() != "ci":
        return
    offenders = [
        f"{item.nodeid}: {reason}"
        for item in items
        if (reason := hypothesis_profiles.nondeterminism(getattr(item, "obj", None)))
    ]
    if offenders:
        raise pytest.UsageError(
            "hypothesis tests that are not deterministic under the ci profile:\n"
            + "\n".join(offenders[:20])
        )


@pytest.fixture(autouse=True, scope="session")
def _private_calibration_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests (and the processes they start) never read or write the user's calibration cache or
    prefix cache; they share one of each for the session (a measurement taken by one test serves
    the next), and the prefix cache's RAM tier is deleted at the end."""
    previous = os.environ.get("CODEDAG_CACHE_DIR")
    previous_prefix = os.environ.get("CODEDAG_PREFIX_CACHE_DIR")
    os.environ["CODEDAG_CACHE_DIR"] = str(tmp_path_factory.mktemp("codedag-cache"))
    prefix = tmp_path_factory.mktemp("codedag-prefix-cache")
    os.environ["CODEDAG_PREFIX_CACHE_DIR"] = str(prefix)
    yield
    from codedag.store.tiers import PrefixStore, StoreSettings

    PrefixStore.open(StoreSettings(folder=prefix, ram_budget_bytes=1, disk_budget_bytes=1)).clear()
    for name, value in (
        ("CODEDAG_CACHE_DIR", previous),
        ("CODEDAG_PREFIX_CACHE_DIR", previous_prefix),
    ):
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _no_leaked_ram_tiers(request: pytest.FixtureRequest) -> Iterator[None]:
    """A prefix cache a test opened in its ``tmp_path`` leaves no RAM tier in shared memory
    (it lives outside ``tmp_path``, named after the cache's folder, until deleted)."""
    yield
    root = getattr(request.node, "funcargs", {}).get("tmp_path")
    if root is None:
        return
    import shutil

    from codedag.store.tiers import ram_folder

    for disk in Path(root).rglob("store"):  # a cache folder's disk tier
        tier = ram_folder(disk.parent)
        if tier is not None:
            shutil.rmtree(tier, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_leaked_hooks_or_patches() -> Iterator[None]:
    """Fail a test that leaves a profile/trace hook installed or anything patched."""
    from codedag.patching import active_patches

    before = (sys.getprofile(), sys.gettrace())
    yield
    after = (sys.getprofile(), sys.gettrace())
    if after != before:
        sys.setprofile(before[0])
        sys.settrace(before[1])
        pytest.fail(f"test left a tracing hook installed: profile={after[0]!r} trace={after[1]!r}")
    leaked = active_patches()
    if leaked:
        pytest.fail(f"test left functions patched: {', '.join(leaked)}")


def build_cgroup_tree(
    root: Path,
    layout: str,
    *,
    cpu_quota: tuple[int, int] | None = None,
    parent_cpu_quota: tuple[int, int] | None = None,
    memory_limit_bytes: int | None = None,
    cpu_usage_ns: int = 5_000_000_000,
    memory_usage_bytes: int = 300 * 2**20,
    inactive_file_bytes: int = 100 * 2**20,
    group: str = "/docker/abc123",
    cpuset: str = "0-3",
    files: bool = True,
) -> Path:
    """Write a fake /proc/self (cgroup, mountinfo) and cgroup folders; returns the proc/self path.

    ``layout`` is "v1", "v2" or "hybrid" (v1 controllers plus an empty v2 at .../unified).
    ``cpu_quota`` is (quota_us, period_us) on the process's group, ``parent_cpu_quota`` on its
    parent; ``None`` means unlimited. ``files=False`` leaves the limit/usage files out.
    """
    proc = root / "proc" / "self"
    proc.mkdir(parents=True)
    cg = root / "sys" / "fs" / "cgroup"
    unlimited_v1 = 9223372036854771712
    membership: list[str] = []
    mounts: list[str] = []

    def write(folder: Path, name: str, text: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        if files:
            (folder / name).write_text(text + "\n")

    if layout in ("v1", "hybrid"):
        for n, controller in enumerate(["cpu", "cpuacct", "cpuset", "memory"], start=30):
            mount = cg / controller
            mounts.append(f"{n} 20 0:{n} / {mount} rw,relatime - cgroup cgroup rw,{controller}")
            membership.append(f"{n - 29}:{controller}:{group}")
            folder = mount / group.lstrip("/")
            folder.mkdir(parents=True, exist_ok=True)
            if controller == "cpu":
                quota, period = cpu_quota if cpu_quota else (-1, 100000)
                write(folder, "cpu.cfs_quota_us", str(quota))
                write(folder, "cpu.cfs_period_us", str(period))
                pquota, pperiod = parent_cpu_quota if parent_cpu_quota else (-1, 100000)
                write(folder.parent, "cpu.cfs_quota_us", str(pquota))
                write(folder.parent, "cpu.cfs_period_us", str(pperiod))
            elif controller == "cpuacct":
                write(folder, "cpuacct.usage", str(cpu_usage_ns))
            elif controller == "cpuset":
                write(folder, "cpuset.cpus", cpuset)
            else:
                limit = memory_limit_bytes if memory_limit_bytes is not None else unlimited_v1
                write(folder, "memory.limit_in_bytes", str(limit))
                write(folder.parent, "memory.limit_in_bytes", str(unlimited_v1))
                write(folder, "memory.usage_in_bytes", str(memory_usage_bytes))
                write(folder, "memory.stat", f"cache 1\ntotal_inactive_file {inactive_file_bytes}")
    if layout == "hybrid":
        mount = cg / "unified"
        mounts.append(f"40 20 0:40 / {mount} rw,relatime - cgroup2 cgroup2 rw")
        membership.append("0::/")
        write(mount, "cgroup.controllers", "")
        write(mount, "cpu.stat", "usage_usec 999\nuser_usec 1\nsystem_usec 1")
    elif layout == "v2":
        mounts.append(f"40 20 0:40 / {cg} rw,relatime - cgroup2 cgroup2 rw")
        membership.append(f"0::{group}")
        folder = cg / group.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        write(cg, "cgroup.controllers", "cpuset cpu io memory pids")
        quota = f"{cpu_quota[0]} {cpu_quota[1]}" if cpu_quota else "max 100000"
        write(folder, "cpu.max", quota)
        pquota = (
            f"{parent_cpu_quota[0]} {parent_cpu_quota[1]}" if parent_cpu_quota else "max 100000"
        )
        write(folder.parent, "cpu.max", pquota)
        write(folder, "cpu.stat", f"usage_usec {cpu_usage_ns // 1000}\nuser_usec 1\nsystem_usec 1")
        limit = str(memory_limit_bytes) if memory_limit_bytes is not None else "max"
        write(folder, "memory.max", limit)
        write(folder, "memory.current", str(memory_usage_bytes))
        write(folder, "memory.stat", f"anon 1\ninactive_file {inactive_file_bytes}")
        write(folder, "cpuset.cpus.effective", cpuset)
    (proc / "cgroup").write_text("\n".join(membership) + "\n")
    (proc / "mountinfo").write_text(
        "22 1 0:21 / / rw,relatime - ext4 /dev/vda rw\n" + "\n".join(mounts) + "\n"
    )
    return proc


@pytest.fixture
def cgroup_tree(tmp_path: Path) -> Callable[..., Path]:
    """Factory fixture: ``cgroup_tree("v2", cpu_quota=(150000, 100000))`` -> fake proc/self."""
    counter = iter(range(1000))

    def make(layout: str, **kwargs: Any) -> Path:
        return build_cgroup_tree(tmp_path / f"tree{next(counter)}", layout, **kwargs)

    return make


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    support = sys.modules.get("migrate_support")
    tally = getattr(support, "TALLY", None)
    if tally is None or not tally.counts:
        return
    for line in tally.lines():
        terminalreporter.write_line(line)
