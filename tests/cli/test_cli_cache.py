"""``codedag cache clear`` removes a prefix cache's store and nothing that is not one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_inputs import assert_one_line_error, run_cli

from codedag.store.entry import encode
from codedag.store.tiers import PrefixStore, StoreSettings


def test_clear_refuses_a_folder_that_holds_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "thesis.tex").write_text("keep me")
    result = run_cli(capsys, "cache", "clear", "--dir", tmp_path)
    assert_one_line_error(result, "is no prefix cache disk tier", "thesis.tex")
    assert (tmp_path / "store" / "thesis.tex").read_text() == "keep me"


def test_clear_removes_a_store_and_leaves_the_rest_of_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = PrefixStore.open(StoreSettings(tmp_path, ram_budget_bytes=0, disk_budget_bytes=8 << 20))
    store.begin_run()
    encoded = encode(np.ones(1 << 16, np.uint8), store.secret, b"key")
    assert store.put(b"key", encoded, ()) == "stored"
    store.close()
    (tmp_path / "notes.txt").write_text("keep me")
    code, out, err = run_cli(capsys, "cache", "clear", "--dir", tmp_path)
    assert code == 0, err
    assert "MB freed" in out
    assert not (tmp_path / "store").exists()
    assert (tmp_path / "notes.txt").read_text() == "keep me"
