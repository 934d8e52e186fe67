"""How a plan's first epoch stores the prefix cache's values: every value where storing is cheap
beside a sample, paced (a share of the loading time, the rest in the next epoch) where it is not,
and the plan's choice reaching the running cache (figures constructed, no timing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from prefix_support import cache_section
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError
from codedag.optimize.cache import PrefixChain, PrefixFound, Step, TracedChain, decide
from codedag.plan.cache import FIRST_EPOCH_SLACK, STORE_SHARE

SAMPLE_NS = 4_000_000  # a sample's traced library time: 4 ms
STEPS = (("cv2.imread", 2_000_000, 300_000), ("cv2.resize", 500_000, 500_000))


def _found(sources: int = 4, sample_ns: int = SAMPLE_NS) -> PrefixFound:
    chain = PrefixChain("prefix0", "cv2.imread", "data.Files.__getitem__")
    for sample in range(sources):
        steps = [
            Step(10 * sample + i, name, 0, ns, nbytes, (nbytes,), "uint8", f"k{i}")
            for i, (name, ns, nbytes) in enumerate(STEPS)
        ]
        chain.traced.append(TracedChain(sample, chain.caller, "0", "file", steps, "output"))
    return PrefixFound([chain], sources, sources, sample_ns=sample_ns)


def _store(write_ns: int) -> Callable[[int], tuple[int, int]]:
    """A store that reads any value back in 50 us and writes it in ``write_ns``."""
    return lambda nbytes: (50_000, write_ns)


def test_cheap_storing_keeps_every_value_in_the_first_epoch() -> None:
    write = int(0.02 * SAMPLE_NS)
    assert write < FIRST_EPOCH_SLACK * SAMPLE_NS
    section = decide(_found(), _store(write), budget_bytes=1 << 30)
    assert section.cached_chains and section.sample_ns == SAMPLE_NS
    assert section.store_share == 0.0
    assert section.first_epoch.startswith("the first epoch stores every value: storing every ")
    assert "2% of a sample's 4 ms traced" in section.first_epoch


def test_dear_storing_paced_under_auto_says_what_the_second_epoch_forgoes() -> None:
    write = int(0.12 * SAMPLE_NS)  # 0.48 ms per value: 12 % of a sample
    section = decide(_found(), _store(write), budget_bytes=1 << 30, first_epoch="auto")
    assert section.store_share == STORE_SHARE
    line = section.first_epoch
    assert "stores values while storing takes under 3% of its loading time" in line
    # 3 % of 4 ms affords a quarter of the 0.48 ms writes: three quarters of the saving waits
    assert "(about 25% of them)" in line and "12% of a sample's 4 ms traced" in line
    forgone = 0.75 * section.saved_ns_per_sample / 1e6
    assert f"gains about {forgone:.3g} ms per sample less" in line


def test_by_default_every_value_is_stored_and_the_line_says_what_pacing_would_trade() -> None:
    section = decide(_found(), _store(int(0.12 * SAMPLE_NS)), budget_bytes=1 << 30)
    assert section.store_share == 0.0
    line = section.first_epoch
    assert line.startswith("the first epoch stores every value: storing every value adds 0.48")
    forgone = 0.75 * section.saved_ns_per_sample / 1e6
    assert line.endswith(
        "; --first-epoch auto would pace it (about 25% stored in the first epoch, the second "
        f"gaining about {forgone:.3g} ms per sample less)"
    )


def test_paced_always_paces() -> None:
    section = decide(
        _found(), _store(int(0.001 * SAMPLE_NS)), budget_bytes=1 << 30, first_epoch="paced"
    )
    assert section.store_share == STORE_SHARE
    assert "(--first-epoch paced)" in section.first_epoch


def test_nothing_cached_says_nothing_about_the_first_epoch() -> None:
    section = decide(_found(), _store(10**6), budget_bytes=0)
    assert not section.cached_chains
    assert section.store_share == 0.0 and section.first_epoch == ""


def test_the_plans_share_reaches_the_running_cache_unless_the_settings_name_one(
    tmp_path: Path,
) -> None:
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    plan = {"context_device_map": {}, "cache": {**cache_section(), "store_share": 0.03}}
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=1 << 24)
    planned = PipelineMigrator(plan, guard=False, cache=CacheSettings(store=store))
    assert planned.cache.session.store_share == 0.03
    mine = PipelineMigrator(plan, guard=False, cache=CacheSettings(store=store, store_share=0.0))
    assert mine.cache.session.store_share == 0.0


@pytest.mark.parametrize(("choice", "share"), [("auto", 0.03), ("all", 0.0), ("paced", 0.03)])
def test_a_watched_runs_choice_reaches_the_running_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, choice: str, share: float
) -> None:
    from codedag.integrations.watch import _applied
    from codedag.plan import MigrationPlan

    monkeypatch.setenv("CODEDAG_PREFIX_CACHE_DIR", str(tmp_path / "cache"))
    section = {**cache_section(), "store_share": 0.03 if choice == "auto" else 0.0}
    plan = MigrationPlan.from_dict({"context_device_map": {}, "cache": section})
    migrator = _applied(plan, choice)  # type: ignore[arg-type]
    try:
        assert migrator.cache.session.store_share == share
    finally:
        migrator.restore()


def test_plan_explain_says_how_the_first_epoch_stores() -> None:
    from codedag.optimize.explain import section_lines
    from codedag.plan import MigrationPlan

    section = decide(
        _found(), _store(int(0.12 * SAMPLE_NS)), budget_bytes=1 << 30, first_epoch="auto"
    )
    plan = MigrationPlan.from_dict(
        {"context_device_map": {}, "cache": section.model_dump(mode="json")}
    )
    lines = section_lines(plan)
    at = next(i for i, line in enumerate(lines) if line.startswith("cache: applied"))
    assert lines[at + 1] == f"cache, first epoch: {section.first_epoch}"
    assert "the first epoch stores values while" in lines[at + 1]


def test_an_unknown_first_epoch_choice_is_refused() -> None:
    from codedag.optimize.manager import OptimizerManager

    with pytest.raises(ConfigError, match="first_epoch must be 'auto', 'all' or 'paced'"):
        OptimizerManager(first_epoch="sometimes")  # type: ignore[arg-type]


ENCODED = [
    cv2.imencode(".png", np.full((40, 48, 3), i * 20, np.uint8))[1].tobytes() for i in range(4)
]


class _Decoded(Dataset):
    def __len__(self) -> int:
        return len(ENCODED)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.imdecode(np.frombuffer(ENCODED[index], np.uint8), cv2.IMREAD_COLOR)
        return torch.from_numpy(cv2.resize(image, (32, 32)))


def test_a_traced_samples_library_time_is_at_least_its_chains() -> None:
    from codedag.optimize.cache import candidates, find_prefixes
    from codedag.trace.tracer import trace_dataloader

    tracer, _ = trace_dataloader(DataLoader(_Decoded(), batch_size=4), warmup=0)
    found = find_prefixes(tracer.dag)
    (chain,) = found.chains
    longest = max(c.prefix_ns for c in candidates(chain))
    assert found.sample_ns >= longest > 0


def test_every_value_is_stored_by_default_and_pacing_is_asked_for() -> None:
    from codedag.cli.main import build_parser

    optimize = build_parser("optimize").parse_args(["optimize", "dag.json"])
    run = build_parser("run").parse_args(["run", "--", "python", "train.py"])
    assert (optimize.first_epoch, run.first_epoch) == ("all", "all")
    paced = build_parser("run").parse_args(["run", "--first-epoch", "auto", "--", "python", "x"])
    assert paced.first_epoch == "auto"


def test_the_command_lines_choices_are_the_plans() -> None:
    from typing import get_args

    from codedag.cli.args import FIRST_EPOCH_CHOICES
    from codedag.plan.cache import FirstEpoch

    assert sorted(FIRST_EPOCH_CHOICES) == sorted(get_args(FirstEpoch))


def test_a_watched_run_refuses_an_unknown_choice() -> None:
    import torch.utils.data

    from codedag.integrations.accelerate import accelerate

    loader = torch.utils.data.DataLoader(list(range(4)))
    with pytest.raises(ConfigError, match="first_epoch must be 'auto', 'all' or 'paced'"):
        accelerate(loader, first_epoch="sometimes")  # type: ignore[arg-type]
    assert type(loader) is torch.utils.data.DataLoader  # left as it was
