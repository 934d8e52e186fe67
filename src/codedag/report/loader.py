"""The HTML section of a plan's ``loader`` section: every measured setting, the choice, why."""

from __future__ import annotations

from typing import Any

from codedag.util.text import html_text


def _label(settings: dict[str, Any]) -> str:
    from codedag.plan import LoaderSettings

    return LoaderSettings.model_validate(settings).label()


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    from codedag.plan import LoaderSettings

    one = LoaderSettings.model_validate(a).normalized()
    two = LoaderSettings.model_validate(b).normalized()
    return one.model_dump() == two.model_dump()


TRIAL_COLUMNS = ("phase", "setting", "batches/s", "ms/batch", "wait ms", "start-up ms")
"""The columns of a trials table before its worker memory and status (:func:`trial_cells`)."""


def trial_cells(
    trial: dict[str, Any], chosen: dict[str, Any], yours: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """One trial (a ``LoaderTrial`` as a dict) as plain text: the cells of
    :data:`TRIAL_COLUMNS`, then worker memory (unique / resident MiB) and status, with the
    figures ``-`` where nothing was timed; and its tags (``chosen``, ``yours``)."""
    settings = trial.get("settings", {})
    tags = [name for name, s in (("chosen", chosen), ("yours", yours)) if _same(settings, s)]
    measured = trial.get("batches", 0) > 0
    memory = "-"
    if settings.get("num_workers") and measured:
        unique = trial.get("worker_uss_mb")
        memory = (
            f"{unique:.0f} / " if isinstance(unique, int | float) else ""
        ) + f"{trial.get('worker_rss_mb', 0):.0f}"
    status = trial.get("status", "")
    if trial.get("note"):
        status += f": {trial['note']}"
    figures = ["-"] * 4
    if measured:
        figures = [
            f"{trial.get('batches_per_s', 0):.2f}",
            f"{trial.get('batch_ms', 0):.1f} ± {trial.get('stderr_ms', 0):.1f}",
            f"{trial.get('wait_ms', 0):.1f}",
            f"{trial.get('startup_ms', 0):.0f}",
        ]
    label = _label(settings) + (f" [{', '.join(tags)}]" if tags else "")
    return [trial.get("phase", ""), label, *figures, memory, status], tags


def loader_section_html(section: dict[str, Any]) -> str:
    """The trials table (chosen row highlighted), the limits, the confirmation and the reason."""
    chosen, yours = section.get("chosen", {}), section.get("yours", {})
    columns = (*TRIAL_COLUMNS, "workers MiB (unique / resident)", "status")
    head = "".join(f"<th>{html_text(c)}</th>" for c in columns)
    rows = []
    for trial in section.get("trials", []):
        texts, tags = trial_cells(trial, chosen, yours)
        numbers = range(2, len(TRIAL_COLUMNS)) if trial.get("batches", 0) > 0 else ()
        cells = "".join(
            f'<td class="num">{text}</td>' if i in numbers else f"<td>{html_text(text)}</td>"
            for i, text in enumerate(texts)
        )
        style = ' style="background:#e8f5e9;font-weight:600"' if "chosen" in tags else ""
        rows.append(f"<tr{style}>{cells}</tr>")
    parts = [
        f"<p>Chosen: <b>{html_text(_label(chosen))}</b>; yours: {html_text(_label(yours))}. "
        f"CPU limit {html_text(section.get('cpu_limit'))} ({html_text(section.get('cpu_limit_source', ''))}), "
        f"num_workers searched 0..{html_text(section.get('max_workers'))}; measured in "
        f"{section.get('duration_s', 0):.0f} s on {html_text(section.get('machine', ''))}.</p>",
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>",
        f'<p class="note">{html_text(section.get("reason", ""))}</p>',
    ]
    confirmation = section.get("confirmation")
    if confirmation:
        parts.append(
            f"<p>Side by side ({confirmation.get('rounds')} alternating rounds): "
            f"{confirmation.get('chosen_batches_per_s', 0):.2f} batches/s with the chosen "
            f"settings against {confirmation.get('yours_batches_per_s', 0):.2f} with yours "
            f"({confirmation.get('ratio', 1):.2f}x)" + _first_epochs(confirmation) + ".</p>"
        )
    warm = section.get("warm")
    if warm:
        parts.append(_warm_html(warm))
    return "".join(parts)


def _first_epochs(confirmation: dict[str, Any]) -> str:
    """A first epoch's time on each side, where the plan kept it."""
    chosen, yours = (
        confirmation.get("chosen_first_epoch_s"),
        confirmation.get("yours_first_epoch_s"),
    )
    batches = confirmation.get("first_epoch_batches")
    if not (chosen and yours and batches):
        return ""
    return f"; a first epoch of {batches} batches: {chosen:.2f} s against {yours:.2f} s"


def _warm_html(warm: dict[str, Any]) -> str:
    """The settings for epochs the prefix cache serves: each timed setting and the reason."""
    rows = "".join(
        f"<tr><td>{html_text(_label(t.get('settings', {})))}</td>"
        f'<td class="num">{t.get("batches_per_s", 0):.2f}</td>'
        f'<td class="num">{t.get("batch_ms", 0):.1f}</td></tr>'
        for t in warm.get("trials", [])
    )
    changed = ", ".join(warm.get("changed", [])) or "nothing"
    return (
        f"<h3>Epochs the prefix cache serves</h3><p>Settings: "
        f"<b>{html_text(_label(warm.get('chosen', {})))}</b> (changes {html_text(changed)}), timed on "
        f"{html_text(warm.get('batches', 0))} stored batches with {warm.get('hit_rate', 0):.0%} hits; "
        "switched to from the epoch after one the cache stored or served.</p>"
        "<table><thead><tr><th>setting</th><th>batches/s</th><th>ms/batch</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        f'<p class="note">{html_text(warm.get("reason", ""))}</p>'
    )
