"""Heals a dead process left half-done: settled by the next tick from their journals.

A journal (selfheal/journal.py) whose process is gone and whose task lock is free belongs to a
heal that was cut off. For each file it names:

- still as before the heal: nothing to do;
- holding bytes the heal wrote: put back from the backup (a file the heal created is removed),
  only if nobody changes it meanwhile (core/atomic_write.write_atomic's `unless_changed`);
- anything else (a person edited it since, or the backup is damaged): left as found.

Then a heal row (`rolled_back`, or `interrupted` when something was left as found, with a
manifest so `revert-heal --force` can still put the originals back), an audit line and a note
on the heal's run row; the tick adds the note to the crash alert (run/recovery.recover_heals).
A journal whose heal row exists is only removed: that heal ended and was recorded, the process
died before it removed the journal.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..claude.client import append_jsonl
from ..core import safe_fs
from ..core.atomic_write import write_atomic
from ..core.private_files import write_private
from ..core.records import dataclass
from ..run.heal_protocol import journal_dir
from ..run.locks import TaskLock, lock_path, process_matches
from ..settings.config import Config
from ..state.store import Store
from ..tasks.key_checks import ID_PATTERN
from .healer import AUDIT_LOG
from .journal import SUFFIX, remove_synced
from .tools import FILE_LIMIT, MANIFEST, sha256


@dataclass(frozen=True, slots=True)
class Settled:
    task_id: str
    run_id: int
    outcome: str  # rolled_back | interrupted | closed | unreadable
    note: str  # for the run row, the tick's log and the crash alert


@dataclass(slots=True)
class _Files:
    restored: list[str]
    unchanged: list[str]
    left: list[str]  # left as found, with why


def settle_unfinished(config: Config, store: Store, now: float) -> list[Settled]:
    """Settle every journal left by a process that is gone; skip those still under way."""
    out: list[Settled] = []
    try:
        paths = sorted(p for p in journal_dir(config.logs_dir).iterdir()
                       if p.name.endswith(SUFFIX) and not p.name.startswith("."))
    except OSError:
        return out
    for path in paths:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            task_id, owner = str(record["task"]), record.get("owner") or {}
            int(record["run_id"]), float(record.get("started") or 0)  # readable, or set aside
            if not ID_PATTERN.fullmatch(task_id) or not isinstance(owner, dict):
                raise ValueError(f"bad task id {task_id!r} or owner")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            out.append(_set_aside(path, exc))
            continue
        if process_matches(owner.get("pid"), owner.get("start"), owner.get("boot")):
            continue  # still healing
        lock = TaskLock(lock_path(config.locks_dir, task_id), config.home)
        if not lock.try_acquire():
            continue  # the task is running (an orphan of the dead tick, or a new run)
        try:
            out.append(_settle(config, store, path, record, now))
        finally:
            lock.release()
    return out


def _settle(config: Config, store: Store, path: Path, record: dict[str, Any],
            now: float) -> Settled:
    task_id, run_id = str(record["task"]), int(record["run_id"])
    attempt, started = int(record.get("attempt") or 1), float(record.get("started") or now)
    if store.heal_for_run(task_id, run_id, started) is not None:
        remove_synced(path)
        return Settled(task_id, run_id, "closed", "the heal had ended and was recorded")
    files = _put_back(config, record.get("files") or [])
    backup_dir = str(record.get("backup_dir") or "") or None
    pid = (record.get("owner") or {}).get("pid")
    what = (f"self-heal {attempt} was cut off (its process, pid {pid}, died before it "
            "finished)")
    if files.restored:
        what += f"; the next tick rolled back {', '.join(files.restored)}"
    elif not files.left:
        what += "; none of its changes had reached the files"
    outcome = "rolled_back"
    if files.left:
        outcome = "interrupted"
        what += (f"; left as found: {', '.join(files.left)}: check them; `revert-heal "
                 f"{task_id} --force` puts back the versions from before the heal")
        if backup_dir:
            _write_manifest(config, Path(backup_dir), task_id, record)
    heal_id = store.add_heal(task_id, run_id, attempt, started, what, "", backup_dir, outcome)
    store.add_note(run_id, what)
    append_jsonl(config.logs_dir / AUDIT_LOG, root=config.home, record={
        "time": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        "task": task_id, "run_id": run_id, "attempt": attempt, "event": "recovered",
        "outcome": outcome, "heal_id": heal_id, "diagnosis": what,
        "restored": files.restored, "unchanged": files.unchanged, "left": files.left,
        "backup_dir": backup_dir,
    })
    remove_synced(path)
    return Settled(task_id, run_id, outcome, what)


def _put_back(config: Config, entries: list[dict[str, Any]]) -> _Files:
    home = Path(os.path.realpath(config.home))
    files = _Files([], [], [])
    for entry in entries:
        rel = str(entry.get("path") or "")
        target = Path(os.path.realpath(home / rel))
        if not rel or rel.startswith("/") or not target.is_relative_to(home):
            files.left.append(f"{rel!r} (outside the home; not touched)")
            continue
        current = _read(target, home)
        now_sha = sha256(current) if current is not None else None
        if now_sha == entry.get("before_sha256"):
            files.unchanged.append(rel)
            continue
        if now_sha not in (entry.get("written_sha256") or []):
            files.left.append(f"{rel} (changed since the heal)")
            continue
        if not entry.get("existed"):
            target.unlink(missing_ok=True)
            files.restored.append(rel)
            continue
        try:
            data = Path(str(entry.get("backup"))).read_bytes()
        except OSError:
            data = None
        if data is None or sha256(data) != entry.get("before_sha256"):
            files.left.append(f"{rel} (its backup is missing or damaged)")
        elif write_atomic(target, data, unless_changed=current, root=home):
            files.restored.append(rel)
        else:
            files.left.append(f"{rel} (changed while it was being put back)")
    return files


def _write_manifest(config: Config, backup_dir: Path, task_id: str,
                    record: dict[str, Any]) -> None:
    """What revert-heal reads: a file counts as the heal's while it holds the heal's last
    bytes (so a person's later edit is kept unless --force)."""
    home = Path(os.path.realpath(config.home))
    files = []
    for entry in record.get("files") or []:
        before, written = entry.get("before_sha256"), entry.get("written_sha256") or [None]
        current = _read(Path(os.path.realpath(home / str(entry.get("path") or ""))), home)
        back = (sha256(current) if current is not None else None) == before
        files.append({"path": entry.get("path"), "existed": bool(entry.get("existed")),
                      "before_sha256": before, "after_sha256": before if back else written[-1]})
    manifest = {"task": task_id, "heal": backup_dir.name, "files": files, "interrupted": True}
    try:
        write_private(backup_dir / MANIFEST, json.dumps(manifest, indent=1).encode(),
                      root=config.home)
    except OSError:
        pass  # revert-heal then says the backup cannot be read


def _set_aside(path: Path, exc: Exception) -> Settled:
    """A journal that cannot be read (not ours, or damaged): renamed so it is said once."""
    try:
        os.replace(path, path.with_name(path.name + ".unreadable"))
    except OSError:
        pass
    return Settled("?", 0, "unreadable",
                   f"heal journal {path} cannot be read ({exc}); it was set aside as "
                   f"{path.name}.unreadable: check the files of that heal by hand")


def _read(path: Path, home: Path) -> bytes | None:
    """Walked from the home, never through a symlink or waiting on a FIFO (safe_fs.py)."""
    try:
        return safe_fs.read_regular(path, FILE_LIMIT, root=home)
    except FileNotFoundError:
        return None
    except OSError:  # a folder, a FIFO, a link: not what the heal wrote, left as found
        return b""
