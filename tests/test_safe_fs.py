"""core/safe_fs.py: the primitives every write and read under the home goes through."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mdcron.core import safe_fs
from mdcron.core.safe_fs import NotRegular, UnsafePath


def test_read_regular_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.md")
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            safe_fs.read_regular(tmp_path / "x.md", 100)
        except BaseException as exc:  # noqa: BLE001 (handed to the test thread)
            errors.append(exc)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(30), "read_regular waited on a FIFO"
    assert isinstance(errors[0], NotRegular) and errors[0].kind == "a FIFO"
    assert "not a regular file (a FIFO)" in str(errors[0])


def test_read_regular_bounds_and_links(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 1000)
    assert len(safe_fs.read_regular(tmp_path / "big", 10)) == 11  # limit + 1: "too large"
    (tmp_path / "link").symlink_to(tmp_path / "big")
    with pytest.raises(NotRegular, match="is a symlink"):
        safe_fs.read_regular(tmp_path / "link", 10)
    (tmp_path / "dir").mkdir()
    with pytest.raises(NotRegular, match="folder"):
        safe_fs.read_regular(tmp_path / "dir", 10)


def test_paths_must_stay_under_their_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    with pytest.raises(UnsafePath, match="'..'"):
        safe_fs.open_file(home / "logs" / ".." / ".." / "x", os.O_WRONLY | os.O_CREAT, root=home)
    with pytest.raises(UnsafePath, match="outside"):
        safe_fs.open_file(tmp_path / "x", os.O_WRONLY | os.O_CREAT, root=home)
    assert not (tmp_path / "x").exists()


def test_folders_are_made_private_and_a_symlinked_one_is_refused(tmp_path: Path) -> None:
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    safe_fs.replace_file(home / "a" / "b" / "f", b"data", root=home, create_dirs=True)
    assert (home / "a" / "b" / "f").read_bytes() == b"data"
    assert (home / "a").stat().st_mode & 0o777 == 0o700
    (home / "c").symlink_to(outside)
    with pytest.raises(UnsafePath, match=f"{home / 'c'} is a symlink"):
        safe_fs.replace_file(home / "c" / "f", b"data", root=home, create_dirs=True)
    (home / "a" / "b" / "link").symlink_to(outside / "victim")
    safe_fs.replace_file(home / "a" / "b" / "link", b"mine", root=home)  # replaced, not followed
    assert not (outside / "victim").exists() and not (home / "a" / "b" / "link").is_symlink()
    assert os.listdir(outside) == []


def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    os.chown(home / "logs", 54321, 54321)
    with pytest.raises(UnsafePath, match="belongs to uid 54321"):
        safe_fs.open_file(home / "logs" / "x", os.O_WRONLY | os.O_CREAT, root=home)
    assert not (home / "logs" / "x").exists()
