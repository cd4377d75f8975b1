"""core/folder_watch.py: the daemon's held tick asks one inotify read, not 1,100 stats, whether
anything in the tasks folder (or the code) changed since its view was loaded (issue 27). Every
way a task file can change must stir the watch, or be left to a stat (links); a filesystem it
cannot see every change of gets no watch. Real folders, real files, the real kernel."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from mdcron.core.folder_watch import FolderWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("a.md", "b.md", ".hidden.md", "notes.txt"):
        (tasks / name).write_text(f"{name}\n", encoding="utf-8")
    return tasks


def watching(folder: Path) -> FolderWatch:
    watch = FolderWatch.start({str(folder): ".md"})
    if watch is None:
        pytest.skip(f"{folder}: no inotify watch here (not a local filesystem, or limits)")
    return watch


def test_an_untouched_folder_is_quiet_and_reading_it_does_not_stir_it(folder):
    watch = watching(folder)
    try:
        for path in folder.iterdir():
            path.read_bytes()
            os.stat(path)
        assert watch.quiet() and watch.quiet()
        assert watch.links == []
    finally:
        watch.close()


def _rename_over(folder: Path, _: Path) -> None:  # how editors save
    (folder / "a.tmp").write_text("new\n", encoding="utf-8")
    os.replace(folder / "a.tmp", folder / "a.md")


def _through_a_hard_link(folder: Path, elsewhere: Path) -> None:
    os.link(folder / "a.md", elsewhere / "same.md")  # made after the watch started
    with open(elsewhere / "same.md", "a", encoding="utf-8") as f:
        f.write("enabled: false\n")


def _folder_swapped(folder: Path, elsewhere: Path) -> None:
    folder.rename(elsewhere / "old-tasks")
    folder.mkdir()


def _folder_made_a_symlink(folder: Path, elsewhere: Path) -> None:
    """The symlink in place of the folder: its path now leads to another folder."""
    other = elsewhere / "other-tasks"
    other.mkdir()
    (other / "a.md").write_text("a.md\n", encoding="utf-8")
    folder.rename(elsewhere / "old-tasks")
    folder.symlink_to(other)


CHANGES = {
    "written": lambda folder, _: (folder / "a.md").write_text("new\n", encoding="utf-8"),
    "appended": lambda folder, _: open(folder / "b.md", "a").close(),  # opened for writing
    "touched": lambda folder, _: os.utime(folder / "a.md", ns=(1, 1)),
    "chmod": lambda folder, _: os.chmod(folder / "a.md", 0o600),
    "created": lambda folder, _: (folder / "c.md").write_text("c\n", encoding="utf-8"),
    "hidden file created": lambda folder, _: (folder / ".x.md").write_text("", encoding="utf-8"),
    "removed": lambda folder, _: (folder / "b.md").unlink(),
    "moved out": lambda folder, elsewhere: (folder / "b.md").rename(elsewhere / "b.md"),
    "moved in": lambda folder, elsewhere: (
        (elsewhere / "n.md").write_text("n\n", encoding="utf-8"),
        (elsewhere / "n.md").rename(folder / "n.md")),
    "renamed over (an editor's save)": _rename_over,
    "written through a hard link elsewhere": _through_a_hard_link,
    "the folder swapped for another": _folder_swapped,
    "the folder removed": lambda folder, elsewhere: folder.rename(elsewhere / "gone"),
    "the folder replaced by a symlink to another": _folder_made_a_symlink,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_every_way_a_task_file_changes_stirs_the_watch(folder, tmp_path, change):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    watch = watching(folder)
    try:
        assert watch.quiet()
        CHANGES[change](folder, elsewhere)
        assert not watch.quiet(), change
        assert not watch.quiet()  # once stirred, for good
    finally:
        watch.close()


def test_a_symlinked_task_file_is_left_to_a_stat(folder, tmp_path):
    """The target's path can change out of the watch's sight: the link is listed, not vouched
    for (View.refresh stats it again)."""
    target = tmp_path / "kept-elsewhere.md"
    target.write_text("x\n", encoding="utf-8")
    (folder / "linked.md").symlink_to(target)
    watch = watching(folder)
    try:
        assert watch.links == [str(folder / "linked.md")]
        assert watch.quiet()
    finally:
        watch.close()


def test_a_folder_of_a_filesystem_another_machine_may_write_gets_no_watch():
    """procfs stands here for the types it does not trust (NFS, SMB, FUSE: not every change
    comes through this kernel): the caller stats everything, as without a watch."""
    assert FolderWatch.start({"/proc": None}) is None


def test_a_missing_folder_gets_no_watch(tmp_path):
    assert FolderWatch.start({str(tmp_path / "absent"): ".md"}) is None


def test_several_folders_one_watch_any_of_them_stirs_it(folder, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "mod.py").write_text("x = 1\n", encoding="utf-8")
    watch = FolderWatch.start({str(folder): ".md", str(code): None})
    if watch is None:
        pytest.skip("no inotify watch here")
    try:
        assert watch.quiet()
        (code / "mod.py").write_text("x = 2\n", encoding="utf-8")
        assert not watch.quiet()
    finally:
        watch.close()


def _is_inotify(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
    except OSError:
        return False


def test_close_later_closes_from_its_own_thread_and_quiet_says_so(folder):
    watch = watching(folder)
    fd = watch.fd
    watch.close_later(0.3)
    assert _is_inotify(fd) and watch.quiet()  # still watching until then
    closer = [t for t in threading.enumerate() if t.name == "folder-watch-close"]
    assert len(closer) == 1
    closer[0].join(10)
    assert watch.fd is None and not _is_inotify(fd)
    assert not watch.quiet()  # closed: it vouches for nothing


def test_its_descriptor_is_not_inherited_by_what_the_tick_starts(folder):
    watch = watching(folder)
    try:
        assert not os.get_inheritable(watch.fd)
    finally:
        watch.close()


UNREADABLE_CHECK = """
import ctypes, os, sys
from mdcron.core.folder_watch import FolderWatch
folder = sys.argv[1]
if os.geteuid() == 0:  # root reads every file: as nobody, /proc/self still its own (dumpable)
    os.setresuid(65534, 65534, 0)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
watch = FolderWatch.start({folder: ".md"})
assert watch is not None, "no watch at all"
assert watch.links == [os.path.join(folder, "b.md")], watch.links
assert watch.quiet()
os.utime(os.path.join(folder, "a.md"))
assert not watch.quiet()
print("ok")
"""


def test_an_unreadable_task_file_is_left_to_a_stat_and_the_others_still_watched():
    """The kernel watches only what the user can read. Checked as `nobody` where the tests
    are root (root reads every file), in a folder of its own."""
    import subprocess
    import tempfile

    base = tempfile.mkdtemp(prefix="mdcron-watch-")
    try:
        os.chmod(base, 0o755)
        folder = Path(base) / "tasks"
        folder.mkdir()
        for name in ("a.md", "b.md"):
            (folder / name).write_text("x\n", encoding="utf-8")
        os.chmod(folder / "b.md", 0)
        if os.geteuid() == 0:
            os.chown(folder, 65534, 65534)
            os.chown(folder / "a.md", 65534, 65534)
        repo = Path(__file__).resolve().parents[1]
        done = subprocess.run([sys.executable, "-c", UNREADABLE_CHECK, str(folder)],
                              capture_output=True, text=True, cwd=repo,
                              env={**os.environ, "PYTHONPATH": str(repo)}, timeout=60)
        assert done.stdout.strip() == "ok", done.stderr
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def test_a_fifo_named_like_a_task_file_neither_hangs_the_watch_nor_escapes_it(folder):
    """The hostile file: a FIFO `x.md` is watched without being opened (no reader waits on
    it), and a writer filling it stirs the watch as any write would."""
    os.mkfifo(folder / "x.md")
    watch = watching(folder)
    try:
        assert watch.quiet()
        fd = os.open(folder / "x.md", os.O_RDWR | os.O_NONBLOCK)  # its own reader: no block
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
        assert not watch.quiet()
    finally:
        watch.close()
