"""TensorBoard event files written on the caller's thread, their records checksummed in C.

TensorBoard's own ``EventFileWriter`` frames each event as a TFRecord (length, its masked CRC-32C,
the event, its masked CRC-32C) with a CRC-32C computed in pure Python: about 25 µs for a 90-byte
event, twice per event, on a thread of its own. The monitor's points come from its sampler's
thread a block at a time, so this writer frames them there, with ``google-crc32c``'s C
implementation (installed with ``codedag[tensorboard]``), and falls back to TensorBoard's function
without it. The bytes are the same either way, and so are the file names and the first record:
TensorBoard reads these files as its own.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codedag.util.io import open_no_follow

_MASK_DELTA = 0xA282EAD8
_UIDS = itertools.count()


def _c_masked_crc32c() -> Callable[[bytes], int] | None:
    """TFRecord's masked CRC-32C through google-crc32c's C code, or ``None`` without it."""
    try:
        import google_crc32c
    except ImportError:
        return None
    if getattr(google_crc32c, "implementation", "") != "c":
        return None
    value = google_crc32c.value

    def masked(data: bytes) -> int:
        crc = value(data)
        return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF

    return masked


def masked_crc32c_function() -> Callable[[bytes], int]:
    """The fastest masked CRC-32C available: google-crc32c's C code, else TensorBoard's."""
    found = _c_masked_crc32c()
    if found is not None:
        return found
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c


def frame(data: bytes, masked_crc32c: Callable[[bytes], int]) -> bytes:
    """One TFRecord: little-endian length, its masked CRC, the data, the data's masked CRC."""
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


class EventFile:
    """One ``events.out.tfevents.*`` file in ``folder``, events appended as they come.

    Not thread-safe: the caller holds a lock when several threads add events.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SourceMetadata

        Path(folder).mkdir(parents=True, exist_ok=True)
        stamp = int(time.time())
        name = (
            f"events.out.tfevents.{stamp:010d}.{socket.gethostname()}.{os.getpid()}.{next(_UIDS)}"
        )
        self.path = Path(folder) / name
        self._crc = masked_crc32c_function()
        fd = open_no_follow(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # never via a link
        self._file = os.fdopen(fd, "wb")
        first = Event(
            wall_time=time.time(),
            file_version="brain.Event:2",
            source_metadata=SourceMetadata(writer="codedag.monitor.sinks.event_file"),
        )
        self.add_event(first)
        self.flush()

    def add_event(self, event: Any) -> None:
        """Append one ``Event`` protocol buffer."""
        self._file.write(frame(event.SerializeToString(), self._crc))

    def flush(self) -> None:
        """Hand what was written to the operating system (TensorBoard reads it from there)."""
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        """Flush and close the file (a second call does nothing)."""
        if not self._file.closed:
            self._file.close()
