"""The checked JSON reader: size caps (raw and inflated), UTF-8, nesting depth, clear errors."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codedag.errors import ConfigError, SchemaError
from codedag.util.io import (
    MAX_INPUT_ENV,
    gunzip_capped,
    input_limit_bytes,
    json_depth,
    read_json,
)


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


json_text = st.text(alphabet=st.sampled_from('[]{}"\\ab\n\u00e9'), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | json_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=30,
)


@given(json_values, st.booleans())
def test_depth_ignores_brackets_quotes_and_escapes_inside_strings(value: Any, ascii: bool) -> None:
    data = json.dumps(value, ensure_ascii=ascii).encode("utf-8")
    assert json_depth(data) == depth_of(value)


def test_reads_plain_and_gzip_json(tmp_path: Path) -> None:
    plain, packed = tmp_path / "a.json", tmp_path / "a.json.gz"
    plain.write_text('{"x": [1, 2]}')
    packed.write_bytes(gzip.compress(b'{"x": [1, 2]}'))
    assert read_json(plain, "thing") == read_json(packed, "thing") == {"x": [1, 2]}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested deeper than 100 levels"),
        (b'{"a": "\xff\xfe"}', "is not UTF-8 text (byte 0xff at offset 7)"),
        (
            b'{"a": 1,}',
            "is not JSON: Expecting property name enclosed in double quotes at line 1 column 9",
        ),
        (b"", "is not JSON: Expecting value at line 1 column 1"),
        (b"[1, 2]", "expected a JSON object, got array"),
        (b'{"n": ' + b"9" * 5000 + b"}", "is not JSON"),
        (gzip.compress(b"[1]")[:10] + b"\xff" * 12, "corrupt gzip data"),
        (gzip.compress(b'{"a": 1}')[:-6], "truncated gzip data"),
    ],
)
def test_bad_files_give_one_line_naming_file_and_problem(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    with pytest.raises(SchemaError) as info:
        read_json(path, "migration plan", expect=dict)
    message = str(info.value)
    assert problem in message and f"migration plan {path}" in message
    assert "\n" not in message


def test_missing_folder_and_device_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        read_json(tmp_path / "nope.json", "models config", error=ConfigError)
    with pytest.raises(ConfigError, match="is a folder; expected a file"):
        read_json(tmp_path, "models config", error=ConfigError)
    with pytest.raises(SchemaError, match="not a regular file"):
        read_json("/dev/zero", "execution DAG")


def test_size_cap_on_raw_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.json"
    path.write_text("[" + " " * 3 * 2**20 + "]")
    with pytest.raises(SchemaError, match=f"larger than 2 MiB; set {MAX_INPUT_ENV}"):
        read_json(path, "results file", max_bytes=2 * 2**20)
    monkeypatch.setenv(MAX_INPUT_ENV, "1")
    with pytest.raises(SchemaError, match="larger than 1 MiB"):
        read_json(path, "results file")
    monkeypatch.setenv(MAX_INPUT_ENV, "8")
    assert read_json(path, "results file") == []


def test_gzip_bomb_stops_at_the_cap_without_inflating_it_all(tmp_path: Path) -> None:
    bomb = tmp_path / "dag.json.gz"
    # 64 MiB of whitespace in about 64 KiB: inflating stops just past the 4 MiB cap.
    bomb.write_bytes(gzip.compress(b"[" + b" " * (64 * 2**20) + b"]", compresslevel=9))
    assert bomb.stat().st_size < 2**20
    with pytest.raises(SchemaError, match="inflates to more than 4 MiB"):
        read_json(bomb, "execution DAG", max_bytes=4 * 2**20)


def test_large_gzip_within_the_cap_is_inflated_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    import codedag.util.io as io_module

    monkeypatch.setattr(io_module, "_KEEP_BYTES", 1000)  # past it, the first pass only counts
    payload = json.dumps(list(range(5000))).encode()
    assert gunzip_capped(gzip.compress(payload), 10**6, "x") == payload


def test_gunzip_reads_several_members_and_rejects_trailing_bytes() -> None:
    two = gzip.compress(b"[1,") + gzip.compress(b"2]")
    assert gunzip_capped(two, 100, "x") == b"[1,2]"
    with pytest.raises(SchemaError, match="unexpected bytes after the gzip data"):
        gunzip_capped(gzip.compress(b"[]") + b"junk", 100, "x")


@pytest.mark.parametrize("bad", ["0", "-3", "nan", "inf", "lots"])
def test_bad_limit_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(MAX_INPUT_ENV, bad)
    with pytest.raises(ConfigError, match=MAX_INPUT_ENV):
        input_limit_bytes()


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"k": "\u00e9"}).encode())
    assert read_json(path, "config") == {"k": "\u00e9"}


def test_unreadable_file_names_the_reason(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "locked.json"
    path.write_text("{}")
    path.chmod(0)
    with pytest.raises(SchemaError, match="Permission denied"):
        read_json(path, "results file")


def test_a_link_where_a_file_is_written_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    from codedag.errors import WriteError
    from codedag.util.io import atomic_write_text

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    with pytest.raises(WriteError, match="is a symbolic link") as info:
        atomic_write_text(link, "{}")
    assert "\n" not in str(info.value)
    assert link.is_symlink() and victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "victim.txt"]  # no temp


@pytest.mark.parametrize("kind", ["symlink", "dangling", "hardlink"])
def test_open_no_follow_refuses_links_and_writes_nothing(tmp_path: Path, kind: str) -> None:
    from codedag.errors import WriteError
    from codedag.util.io import open_no_follow

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = tmp_path / "file.log"
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "made-through-the-link")
    else:
        os.link(victim, path)
    with pytest.raises(WriteError, match=r"symbolic link|hard links"):
        open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "made-through-the-link").exists()


def test_open_no_follow_refuses_a_pipe_without_hanging(tmp_path: Path) -> None:
    from codedag.errors import WriteError
    from codedag.util.io import open_no_follow

    pipe = tmp_path / "stream.csv"
    os.mkfifo(pipe)
    with pytest.raises(WriteError, match="no regular file"):
        open_no_follow(pipe, os.O_RDWR | os.O_CREAT)


def test_open_no_follow_creates_truncates_and_appends(tmp_path: Path) -> None:
    from codedag.util.io import open_no_follow

    path = tmp_path / "file.log"
    path.write_text("old")
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b"new")
    os.close(fd)
    fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"+")
    os.close(fd)
    assert path.read_text() == "new+"
