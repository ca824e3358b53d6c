"""A real full disk for the fault tests: a 64 kB tmpfs (root only; skipped elsewhere)."""

import subprocess

import pytest


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(reason=f"cannot mount a 64 kB tmpfs here ({proc.stderr.strip()}); the "
                           "patched writer tests cover the same path")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)
