"""Batched stats (the fields users read, and the CLI table) and ``verify``: a backend that is
wrong is caught on a verified batch, the batch is replaced by its CPU reference, and batched
execution stops with a counted reason."""

from __future__ import annotations

import functools
import io
from typing import Any

import pytest
import torch
from batched_support import Augmented, images, loader, max_level_diff, run
from rich.console import Console

import codedag.backends.batched.ops as ops
from codedag.cli.migrate import batched_table
from codedag.migrate.batched.settings import BatchedSettings

FIELDS = {
    "batches",
    "samples",
    "groups",
    "backend_calls",
    "h2d_bytes",
    "d2h_bytes",
    "forced",
    "worker_ms",
    "main_ms",
}


@pytest.mark.timeout(120)
def test_stats_name_the_counters_and_print_as_a_table() -> None:
    make = functools.partial(loader, Augmented(images(6)), 0, 4)
    _reference, _batches, stats = run(make)
    assert set(stats) >= FIELDS
    assert stats["batches"] == 2 and stats["samples"] == 6 and stats["groups"] >= 2
    assert stats["backend_calls"] > 0 and stats["main_ms"] > 0
    out = io.StringIO()
    Console(file=out, width=120).print(batched_table(stats))
    text = out.getvalue()
    for label in ("batches", "samples", "backend calls", "device->host bytes", "main ms"):
        assert label in text
    assert "batched chains on cpu" in " ".join(text.split())


@pytest.mark.timeout(120)
def test_verify_catches_a_wrong_backend_and_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ops.LibraryOp.run

    def wrong(self: Any, args: list[Any], kwargs: dict[str, Any], n: int, device: Any) -> Any:
        out = real(self, args, kwargs, n, device)
        if self.name == "cv2.cvtColor":  # swaps channels back: off by far more than tolerance
            return out.flip(-1) if isinstance(out, torch.Tensor) else out
        return out

    monkeypatch.setattr(ops.LibraryOp, "run", wrong)
    make = functools.partial(loader, Augmented(images(8)), 0, 4)
    reference, batches, stats = run(make, settings=BatchedSettings(verify=1))
    # the verified batch was replaced by its reference; the rest ran unpatched after the stop
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert torch.equal(y, ref_y)
        assert max_level_diff(x, ref_x) <= 1.001
    assert stats["verify"]["batches"] == 1
    assert stats["verify"]["mismatches"], "the wrong backend was not caught"
    assert stats["forced"].get("verify", 0) >= 1
    assert stats["deferring"] is False
    assert stats["batches"] == 1  # only the first batch ran batched


@pytest.mark.timeout(120)
def test_verify_passes_a_right_backend() -> None:
    make = functools.partial(loader, Augmented(images(8)), 0, 4)
    _reference, _batches, stats = run(make, settings=BatchedSettings(verify=2))
    assert stats["verify"]["batches"] == 2 and stats["verify"]["mismatches"] == []
    assert stats["deferring"] is True and stats["forced"] == {}


@pytest.mark.timeout(120)
def test_codedag_migrate_prints_the_batched_table_only_for_batched_plans(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from batched_support import plan

    from codedag.cli.migrate import _print_table
    from codedag.migrate.api import PipelineMigrator

    migrator = PipelineMigrator.from_plan(plan(), guard=False)
    with migrator:
        list(loader(Augmented(images(4)), 0, 4))
    _print_table(migrator.get_stats())
    assert "batched chains" in capsys.readouterr().err
    plain = PipelineMigrator.from_plan({"context_device_map": {}}, guard=False)
    with plain:
        pass
    _print_table(plain.get_stats())
    assert "batched chains" not in capsys.readouterr().err
