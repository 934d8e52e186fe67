"""Names from files never reach a terminal, an HTML page or a DOT file raw.

A DAG, plan or results file naming a function ``\\x1b]0;...\\x07`` (retitles the terminal window)
or ``\\x1b[2J`` (clears the screen), or holding rich markup, is shown with those characters as
visible escapes; a name of megabytes is cut, and thousands of them are one line with a count.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_inputs import make_dag, make_plan, run_cli

from codedag.util.text import dot_string, file_stem, listing, printable

EVIL = "\x1b]0;PWNED\x07\x1b[2J[link=file:///etc/passwd]x[/link]\u202e"
RAW = ("\x1b", "\x07", "\u202e")


def assert_escaped(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text[:400])
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in text, repr(text[:400])


@pytest.fixture(scope="module")
def evil_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("evil")
    dag_path = make_dag(folder)
    plan_path = make_plan(folder, dag_path)
    dag = json.loads(dag_path.read_text())
    for node in dag["nodes"]:
        if node.get("kind") == "call" and node.get("name") == "cv2.resize":
            node["name"] = f"cv2.{EVIL}"
    evil_dag = folder / "evil_dag.json"
    evil_dag.write_text(json.dumps(dag))
    plan = json.loads(plan_path.read_text())
    plan["calls"][0]["function"] = f"cv2.{EVIL}"
    plan["calls"][0]["reason"] = EVIL
    plan["notes"].append(EVIL)
    plan["placement"]["device_name"] = EVIL
    evil_plan = folder / "evil_plan.json"
    evil_plan.write_text(json.dumps(plan))
    from codedag.monitor.experiment import ExperimentMonitor

    monitor = ExperimentMonitor(EVIL, run_dir=folder / "run", flush_interval_s=0)
    for mode in ("baseline", f"opt{EVIL}"):
        monitor.start_mode(mode, resource_interval=None)
        monitor.start_batch()
        monitor.end_batch(4)
        monitor.stop_mode()
    return {"dag": evil_dag, "plan": evil_plan, "results": monitor.save_json(), "folder": folder}


def test_plan_explain_escapes_names_notes_and_markup(
    capsys: pytest.CaptureFixture[str], evil_files: dict[str, Path]
) -> None:
    code, out, err = run_cli(capsys, "plan", "explain", evil_files["plan"], "--all")
    assert code == 0, err
    assert_escaped(out)
    assert "[link=file:///etc/passwd]" in out  # shown as text, not made a hyperlink
    assert "\\u202e" in out


def test_optimize_explain_and_its_dot_file_escape_traced_names(
    capsys: pytest.CaptureFixture[str], evil_files: dict[str, Path], tmp_path: Path
) -> None:
    out_dir = tmp_path / "o"
    argv = ["optimize", evil_files["dag"], "--gpus", "0", "--target-device", "cpu"]
    code, out, err = run_cli(capsys, *argv, "--assume-speedup", "8", "--explain", "--out", out_dir)
    assert code == 0, err
    assert_escaped(out + err)
    dot = (out_dir / "coarsening_graph.dot").read_text()
    assert not any(c in dot for c in RAW) and "\\\\x1b]0;PWNED" in dot


def test_report_escapes_experiment_and_mode_names_in_the_table_and_html(
    capsys: pytest.CaptureFixture[str], evil_files: dict[str, Path]
) -> None:
    code, out, err = run_cli(capsys, "report", evil_files["results"], "--no-plots")
    assert code == 0, err
    assert_escaped(out + err)


def test_a_traced_dot_file_of_an_undecodable_path_is_written(tmp_path: Path) -> None:
    from codedag.graph.model import ExecutionDAG
    from codedag.trace.dot import to_dot

    dag = ExecutionDAG()
    name = b"/tmp/\xff\xfe/train.py".decode("utf-8", "surrogateescape")  # a non-UTF-8 file name
    dag.metadata["target"] = f"{name}:main"
    dag.add_call(name=f"{name}:main", context_key="main#0")
    text = to_dot(dag)
    text.encode("utf-8")  # what writing dag.dot does; it raised UnicodeEncodeError
    assert "\\\\xff\\\\xfe" in text


def test_the_one_escaper() -> None:
    assert printable("a\x1b[2Jb\x7f\x9b\u2028") == "a\\x1b[2Jb\\x7f\\x9b\\u2028"
    assert printable("é ü 名前") == "é ü 名前"  # ordinary text stays as it is
    assert printable("x" * 50, 10) == "xxxxxxxxxx... (40 more characters)"
    assert printable(b"\xff".decode("utf-8", "surrogateescape")) == "\\xff"
    assert dot_string('a"b\\c\nd\x1b') == '"a\\"b\\\\c\\nd\\\\x1b"'
    assert file_stem("../../etc/passwd") == "_.._etc_passwd" and file_stem("") == "_"
    assert listing([str(i) for i in range(10)], 3) == "0, 1, 2, ... and 7 more"


def test_the_cli_log_handler_cuts_escapes_and_counts_repeats() -> None:
    import io
    import logging

    from codedag.util.logs import FLOOD_RECORDS, setup_logging, suppressed_summary

    stream = io.StringIO()
    logger = setup_logging(0, stream)
    try:
        log = logging.getLogger("codedag.test_odd_names")
        log.warning("one %s", "x" * 10_000_000)  # the highlighter once took minutes on this
        for i in range(FLOOD_RECORDS + 500):
            log.warning("skipping %s: %s", f"mod{i}{EVIL}", "unknown")
        summary = suppressed_summary()
    finally:
        logger.handlers.clear()
    text = stream.getvalue()
    assert not any(c in text for c in RAW)
    assert len(text) < 200_000 and "more characters" in text
    assert text.count("skipping") == FLOOD_RECORDS
    assert summary is not None and "500 more log message(s)" in summary


def test_html_pages_show_names_escaped() -> None:
    from codedag.report.html import ReportContent, render_html

    page = render_html(
        ReportContent(
            title=EVIL,
            summary_columns=["function"],
            summary_rows=[[f"<script>{EVIL}"]],
            notes=[EVIL],
            dag_dot=f"digraph {{ n0 [label={dot_string(EVIL)}]; }}",
        )
    )
    assert not any(c in page for c in RAW)
    assert "&lt;script&gt;" in page and "<script>\\x1b" not in page
