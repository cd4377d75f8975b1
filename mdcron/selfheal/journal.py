"""The heal journal: what a heal is about to change, on disk before the change.

A heal killed half-way (the tick SIGKILLed, the machine switched off) must leave nothing
half-done. So before a heal changes the first byte of a file, the file's backup and an intent
record are written and fsynced: logs/heal-journal/<task>--<backup name>.json names the heal
(task, heal run, attempt, start, the process doing it, the backup folder) and, for every file it
touches, the home-relative path, whether it existed, the sha256 of its bytes before, its backup
and the sha256 of everything the heal is about to write there. The record is replaced (temp,
fsync, rename, fsync the folder) before each write, so it always covers what is on disk. Once
the heal is recorded (row and audit line), the journal is removed.

The next tick settles a journal whose process is gone (selfheal/unfinished.py). logs/ is out of
the model's reach (tools.py: never read, never written), and owner-only, like the backups.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..core.private_files import make_private_dirs
from ..core.records import dataclass, field
from ..run.attempt import current_owner
from ..run.heal_protocol import journal_dir
from ..settings.config import Config
from .tools import sha256

VERSION = 1
SUFFIX = ".json"


@dataclass
class HealJournal:
    """One heal's intent record. Nothing is on disk until the first `intend`."""

    path: Path
    record: dict[str, Any]
    backups_root: Path  # folders up to here are fsynced when a backup is made
    on_disk: bool = field(default=False)

    @classmethod
    def begin(cls, config: Config, task_id: str, task_file: Path, run_id: int, attempt: int,
              started: float, backup_dir: Path) -> HealJournal:
        owner = current_owner()
        record = {
            "version": VERSION, "task": task_id, "task_file": str(task_file), "run_id": run_id,
            "attempt": attempt, "started": started, "backup_dir": str(backup_dir),
            "owner": {"pid": owner.pid, "start": owner.start, "boot": owner.boot},
            "files": [],
        }
        path = journal_dir(config.logs_dir) / f"{task_id}--{backup_dir.name}{SUFFIX}"
        return cls(path, record, backup_dir.parent.parent)

    def intend(self, rel: str, before: bytes | None, backup: Path, after_sha: str) -> None:
        """Say that `rel` (backed up at `backup` when it existed) is about to hold the bytes of
        sha256 `after_sha`; returns once that is on disk."""
        files: list[dict[str, Any]] = self.record["files"]
        entry = next((f for f in files if f["path"] == rel), None)
        if entry is None:
            if before is not None:  # the backup itself must survive what the journal survives
                _fsync_path(backup)
                _fsync_folders(backup.parent, self.backups_root)
            entry = {"path": rel, "existed": before is not None,
                     "before_sha256": sha256(before) if before is not None else None,
                     "backup": str(backup) if before is not None else None,
                     "written_sha256": []}
            files.append(entry)
        if after_sha not in entry["written_sha256"]:
            entry["written_sha256"].append(after_sha)
        # logs/heal-journal/ walked from the home (its parents[2]), never through a symlink
        make_private_dirs(self.path.parent, root=self.path.parents[2])
        write_synced(self.path, json.dumps(self.record, indent=1).encode())
        self.on_disk = True

    def close(self) -> None:
        """The heal is recorded: nothing is left to settle."""
        if self.on_disk:
            remove_synced(self.path)
            self.on_disk = False


def write_synced(path: Path, data: bytes) -> None:
    """Replace `path` (owner-only) so that a crash leaves the old or the new bytes, both
    durable: temp file, fsync, rename, fsync the folder. Never through a symlink."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_path(path.parent)


def remove_synced(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_path(path.parent)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folders(folder: Path, root: Path) -> None:
    """fsync `folder` and its parents up to and including `root` (new folders' entries)."""
    while True:
        _fsync_path(folder)
        if folder == root or root not in folder.parents:
            return
        folder = folder.parent
