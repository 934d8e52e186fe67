"""The report's DataLoader section: every trial, the chosen row, the reason, escaped."""

from __future__ import annotations

from codedag.plan import LoaderSection, LoaderSettings, LoaderTrial
from codedag.plan.loader import LoaderConfirmation
from codedag.report.html import ReportContent, render_html


def _section() -> LoaderSection:
    chosen = LoaderSettings(num_workers=2, threads=1)
    return LoaderSection(
        chosen=chosen,
        yours=LoaderSettings(),
        changed=["num_workers", "threads"],
        reason="2 workers <beat> yours",
        trials=[
            LoaderTrial(settings=LoaderSettings(), phase="yours", batches=8, batches_per_s=5.0),
            LoaderTrial(
                settings=LoaderSettings(num_workers=1, threads=1),
                phase="workers",
                status="stopped early",
                batches=4,
                batches_per_s=4.0,
                note="clearly slower",
                worker_rss_mb=400.0,
                worker_uss_mb=30.0,
            ),
            LoaderTrial(settings=chosen, phase="workers", batches=8, batches_per_s=11.0),
        ],
        confirmation=LoaderConfirmation(
            rounds=3,
            yours_batches_per_s=5.0,
            chosen_batches_per_s=10.5,
            ratio=2.1,
            first_epoch_batches=6,
            yours_first_epoch_s=0.22,
            chosen_first_epoch_s=0.19,
        ),
        cpu_limit=2.0,
        cpu_limit_source="cgroup cpu.max",
        max_workers=2,
    )


def test_the_loader_section_shows_every_trial_and_the_choice() -> None:
    page = render_html(ReportContent(title="t", loader=_section().model_dump(mode="json")))
    assert "<h2>DataLoader settings</h2>" in page
    assert "2 workers x 1 thread [chosen]" in page and "in-process (0 workers) [yours]" in page
    assert "stopped early: clearly slower" in page and "30 / 400" in page
    assert "2 workers &lt;beat&gt; yours" in page and "<beat>" not in page
    assert "(2.10x)" in page and "num_workers searched 0..2" in page
    assert "a first epoch of 6 batches: 0.19 s against 0.22 s" in page


def test_reports_without_loader_settings_have_no_such_section() -> None:
    assert "DataLoader settings" not in render_html(ReportContent(title="t"))
