"""A disk tier on a network filesystem is refused: LMDB's locks do not hold across machines."""

from __future__ import annotations

from pathlib import Path

import pytest

import codedag.store.network_fs as network_fs
from codedag.store.lmdb_tier import LmdbTier, TierError
from codedag.store.network_fs import filesystem_of

MOUNTINFO = """\
22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
30 22 0:45 / /data rw shared:2 - nfs4 server:/export rw,vers=4.2
31 30 259:3 / /data/local rw shared:3 - xfs /dev/nvme1n1 rw
32 22 0:46 / /mnt/my\\040share rw shared:4 - cifs //host/share rw
33 22 0:47 / /data2 rw shared:5 - ext4 /dev/sdb1 rw
34 22 0:48 / /data2 rw shared:6 - lustre 10.0.0.1@tcp:/fs rw
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/me/.cache/codedag/prefix", ("ext4", "/")),
        ("/data/cache/prefix", ("nfs4", "/data")),
        ("/data", ("nfs4", "/data")),
        ("/data/local/prefix", ("xfs", "/data/local")),  # the deepest mount holding it
        ("/datafile", ("ext4", "/")),  # /data is no prefix of /datafile
        ("/mnt/my share/c", ("cifs", "/mnt/my share")),
        ("/data2/c", ("lustre", "/data2")),  # mounted over the earlier one
    ],
)
def test_the_mount_holding_a_path_gives_its_filesystem(
    path: str, expected: tuple[str, str]
) -> None:
    assert filesystem_of(Path(path), MOUNTINFO) == expected


def test_a_disk_tier_on_a_network_filesystem_is_off_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"22 1 0:45 / {tmp_path.resolve()} rw - nfs4 server:/export rw\n")
    monkeypatch.setattr(network_fs, "MOUNTINFO", mountinfo)
    tier = LmdbTier("disk", tmp_path / "cache" / "store", 1 << 20)
    with pytest.raises(TierError):
        tier.begin_run()
    assert "network filesystem (nfs4 at" in tier.problem
    assert "CODEDAG_PREFIX_CACHE_DIR" in tier.problem
    assert not (tmp_path / "cache").exists()


def test_a_tier_on_a_local_filesystem_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"22 1 259:2 / {tmp_path.resolve()} rw - ext4 /dev/sda1 rw\n")
    monkeypatch.setattr(network_fs, "MOUNTINFO", mountinfo)
    tier = LmdbTier("disk", tmp_path / "cache" / "store", 1 << 20)
    assert tier.begin_run() == 1 and tier.enabled
    tier.close()


def test_the_mount_table_is_read_once_per_folder_and_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(f"22 1 259:2 / {tmp_path.resolve()} rw - ext4 /dev/sda1 rw\n")
    reads: list[str] = []

    class Counted(type(table)):  # type: ignore[misc]
        def read_text(self, *args: object, **kwargs: object) -> str:
            reads.append(str(self))
            return super().read_text(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(network_fs, "MOUNTINFO", Counted(table))
    for _ in range(3):
        assert network_fs.network_filesystem(tmp_path / "cache" / "ram") == ""
        assert network_fs.network_filesystem(tmp_path / "cache" / "store") == ""
    assert len(reads) == 1  # both folders resolve to the same existing folder, tmp_path
    (tmp_path / "cache").mkdir()
    assert network_fs.network_filesystem(tmp_path / "cache" / "store") == ""
    assert len(reads) == 2  # another existing folder: read again
