"""Container detection uses several signs."""

from __future__ import annotations

from pathlib import Path

from codedag.devices.container import detect_container


def test_bare_host_has_no_evidence(tmp_path: Path) -> None:
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/init.scope\n")
    info = detect_container(tmp_path, environ={})
    assert not info.in_container and info.evidence == []


def test_kubernetes_from_cgroup_names_without_dockerenv(tmp_path: Path) -> None:
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/burstable/pod1/abc\n")
    info = detect_container(tmp_path, environ={})
    assert info.in_container and info.runtime == "kubernetes"


def test_podman_and_env_marker(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run/.containerenv").write_text("")
    info = detect_container(tmp_path, environ={"container": "podman"})
    assert info.runtime == "podman" and len(info.evidence) == 2


def test_overlay_root(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(
        "500 400 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/x\n"
    )
    info = detect_container(tmp_path, environ={})
    assert info.in_container and "overlay" in info.evidence[0]
