"""The plan's loader section as HTML: one row per trial, the chosen one marked, the figures."""

from __future__ import annotations

from typing import Any

from codedag.report.loader import TRIAL_COLUMNS, loader_section_html, trial_cells


def _section(**extra: Any) -> dict[str, Any]:
    return {
        "chosen": {"num_workers": 2},
        "yours": {},
        "cpu_limit": 2.0,
        "cpu_limit_source": "cgroup",
        "max_workers": 4,
        "duration_s": 12.4,
        "machine": "host<1>",
        "reason": "2 workers <beat> yours",
        "trials": [
            {"settings": {}, "phase": "yours", "batches": 8, "batches_per_s": 5.0,
             "batch_ms": 200.0, "stderr_ms": 3.0, "wait_ms": 150.0, "startup_ms": 1.0},
            {"settings": {"num_workers": 2}, "phase": "workers", "batches": 8,
             "batches_per_s": 11.0, "batch_ms": 90.0, "worker_uss_mb": 30.4,
             "worker_rss_mb": 400.0},
            {"settings": {"num_workers": 1}, "phase": "workers", "batches": 0,
             "status": "failed", "note": "worker crashed"},
        ],
        **extra,
    }  # fmt: skip


def test_each_trial_is_a_row_with_its_figures_and_tags() -> None:
    html = loader_section_html(_section())
    assert html.count("<tr") == 4  # header and three trials
    assert "in-process (0 workers) [yours]" in html
    assert "2 workers x default threads [chosen]" in html
    assert '<td class="num">11.00</td>' in html and '<td class="num">200.0 ± 3.0</td>' in html
    assert "<td>30 / 400</td>" in html  # workers' unique / resident memory
    assert "<td>failed: worker crashed</td>" in html


def test_only_the_chosen_row_is_highlighted_and_an_unmeasured_one_shows_dashes() -> None:
    html = loader_section_html(_section())
    rows = html.split("<tr")[2:]
    assert ["background:#e8f5e9" in r for r in rows] == [False, True, False]
    assert rows[2].count("<td>-</td>") == 5


def test_text_is_escaped_and_the_limits_are_stated() -> None:
    html = loader_section_html(_section())
    assert "2 workers &lt;beat&gt; yours" in html and "host&lt;1&gt;" in html
    assert "CPU limit 2.0 (cgroup), num_workers searched 0..4; measured in 12 s" in html
    assert "Side by side" not in html


def test_the_confirmation_is_reported_when_present() -> None:
    confirmation = {"rounds": 3, "chosen_batches_per_s": 11.0, "yours_batches_per_s": 5.0,
                    "ratio": 2.2}  # fmt: skip
    html = loader_section_html(_section(confirmation=confirmation))
    assert "Side by side (3 alternating rounds): 11.00 batches/s" in html
    assert "against 5.00 with yours (2.20x)" in html


def test_the_settings_for_epochs_the_cache_serves_have_their_own_table() -> None:
    warm = {
        "chosen": {}, "changed": ["num_workers"], "batches": 6, "hit_rate": 1.0,
        "reason": "load <in process>",
        "trials": [
            {"settings": {"num_workers": 2}, "batches_per_s": 30.0, "batch_ms": 33.3},
            {"settings": {}, "batches_per_s": 45.0, "batch_ms": 22.2},
        ],
    }  # fmt: skip
    html = loader_section_html(_section(warm=warm))
    part = html.split("Epochs the prefix cache serves")[1]
    assert "<b>in-process (0 workers)</b> (changes num_workers)" in part
    assert "6 stored batches with 100% hits" in part
    assert '<td class="num">45.00</td><td class="num">22.2</td>' in part
    assert "load &lt;in process&gt;" in part
    assert "Epochs the prefix cache serves" not in loader_section_html(_section())


def test_trial_cells_are_the_same_text_for_a_plan_dict_and_a_validated_trial() -> None:
    from codedag.plan import LoaderTrial

    section = _section()
    trial = section["trials"][1]
    texts, tags = trial_cells(trial, section["chosen"], section["yours"])
    assert len(texts) == len(TRIAL_COLUMNS) + 2
    assert texts == ["workers", "2 workers x default threads [chosen]", "11.00", "90.0 ± 0.0",
                     "0.0", "0", "30 / 400", ""]  # fmt: skip
    assert tags == ["chosen"]
    dumped = LoaderTrial.model_validate(trial).model_dump()
    assert trial_cells(dumped, section["chosen"], section["yours"])[0][:-1] == texts[:-1]
    unmeasured = trial_cells(section["trials"][2], section["chosen"], section["yours"])[0]
    assert unmeasured[2:7] == ["-"] * 5 and unmeasured[-1] == "failed: worker crashed"


def test_the_terminal_table_shows_each_trials_tags() -> None:
    """rich would take "[chosen]" for markup and print nothing of it."""
    from rich.console import Console

    from codedag.cli.tune import loader_table
    from codedag.plan import LoaderSection

    console = Console(record=True, width=200)
    section = _section()
    section["trials"][2]["status"] = "not measured"
    console.print(loader_table(LoaderSection.model_validate(section)))
    text = console.export_text()
    assert "2 workers x default threads [chosen]" in text
    assert "in-process (0 workers) [yours]" in text
