"""TensorBoard event files written by codedag: the same bytes as TensorBoard's own writer, read
back by TensorBoard's own loader."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import codedag.monitor.sinks.event_file as event_file

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.summary.writer.record_writer import RecordWriter

SAMPLES = [b"", b"a", b"123456789", bytes(range(256)) * 3]


def test_the_c_checksum_equals_tensorboards() -> None:
    fast = event_file._c_masked_crc32c()
    if fast is None:
        pytest.skip("google-crc32c's C implementation is not installed")
    assert [fast(d) for d in SAMPLES] == [masked_crc32c(d) for d in SAMPLES]


@pytest.mark.parametrize("use_c", [True, False])
def test_records_are_framed_as_tensorboard_frames_them(
    use_c: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not use_c:
        monkeypatch.setattr(event_file, "_c_masked_crc32c", lambda: None)
    crc = event_file.masked_crc32c_function()
    for data in SAMPLES:
        buffer = io.BytesIO()
        RecordWriter(buffer).write(data)
        assert event_file.frame(data, crc) == buffer.getvalue()


def test_tensorboards_loader_reads_the_file_back(tmp_path: Path) -> None:
    writer = event_file.EventFile(tmp_path / "run")
    for step in range(5):
        value = Summary.Value(tag="step/time_ms", simple_value=float(step) / 2)
        writer.add_event(Event(step=step, wall_time=100.0 + step, summary=Summary(value=[value])))
    writer.close()
    writer.close()  # a second close does nothing
    (path,) = (tmp_path / "run").glob("events.out.tfevents.*")
    events = list(EventFileLoader(str(path)).Load())
    assert events[0].file_version == "brain.Event:2"
    scalars = [(e.step, e.wall_time, e.summary.value[0].tag) for e in events[1:]]
    assert scalars == [(s, 100.0 + s, "step/time_ms") for s in range(5)]
    # the loader turns simple values into tensors; the value survives
    assert [e.summary.value[0].tensor.float_val[0] for e in events[1:]] == [0, 0.5, 1, 1.5, 2]
