"""Retention: old runs, their logs and heal backups go, and a wrong clock never takes history.

Once a day (RETENTION_EVERY) the tick deletes runs that started more than `retention_days`
before now, their log files and older heal backups. A clock set 98 days ahead for one tick must
not delete every run and every log, so three bounds hold (design.md: "wall-clock jumps are
noticed and said, and never delete history wholesale"):

- **Two ticks agree on the time first.** Retention runs only when the previous tick was at most
  TRUSTED_GAP before now. A tick far after the last one (a clock set forward, or the first tick
  after a long downtime) leaves retention to the next tick, a minute later; a clock that jumped
  for one tick and came back deletes nothing. A tick stamped after now (the clock went back) is
  no reason to wait: with the earlier now, fewer runs are old, not more. A state without a last
  tick (new) has nothing at risk.
- **Never a task's KEEP_RUNS newest runs**, whatever their age, nor their logs.
- **At most RETENTION_SHARE of the runs per pass** (oldest first): a clock that stays wrong,
  or `retention_days` lowered from 365 to 30, thins history over days instead of at once.

Lazy imports: shutil only when old heal backups are removed.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from ..core import safe_fs
from ..settings.config import Config
from ..state.idle import RETENTION_EVERY
from ..state.store import Store

BACKUPS = "heal-backups"  # in logs/ (selfheal/healer.py makes them); pruned with the runs

KEEP_RUNS = 10  # a task's newest runs are never deleted
RETENTION_SHARE = 0.1  # at most this share of all runs per pass
TRUSTED_GAP = 86400.0  # the previous tick must be at most this long before now


def trusted(now: float, last_tick: str | None) -> bool:
    """Pure: does the previous tick's stamp vouch for `now` (see the module docstring)? No
    stamp at all is a new state: nothing in it is old enough to be at risk."""
    try:
        return last_tick is None or now - float(last_tick) <= TRUSTED_GAP
    except ValueError:
        return False


def retention(config: Config, store: Store, now: float, last_tick: str | None) -> None:
    """At most once a day, and only on a trusted clock: the bounded pass."""
    last = store.get_meta("retention_at")
    if last is not None and now - float(last) < RETENTION_EVERY:
        return
    if not trusted(now, last_tick):
        return  # retention_at unchanged: the next tick (the idle one declines) tries again
    store.set_meta("retention_at", repr(now))
    cutoff = now - config.retention_days * 86400
    pruned = store.prune_runs(cutoff, KEEP_RUNS, RETENTION_SHARE)
    try:  # nothing is deleted through a logs/ swapped for a symlink (core/safe_fs.py)
        os.close(safe_fs.open_dir(config.home, config.logs_dir))
    except OSError:
        return
    for log in pruned:
        path = Path(log)
        if config.logs_dir in path.parents:
            safe_fs.remove_file(path, root=config.home, folder_too=True)
    if (config.logs_dir / BACKUPS).is_dir():  # heal backups age out with the runs
        prune_backups(config, cutoff)


def prune_backups(config: Config, older_than: float) -> list[Path]:
    """Delete heal backups (logs/heal-backups/<task>/<stamp>-<attempt>) made before
    `older_than`, by the UTC stamp in their name (the time the heal started), as the tick's
    retention does for runs. Returns what was removed; empty task folders go too."""
    import shutil  # lazy: only when old backups are removed

    root = config.logs_dir / BACKUPS
    removed: list[Path] = []
    try:
        task_dirs = [d for d in root.iterdir() if d.is_dir() and not d.is_symlink()]
    except OSError:
        return removed
    for task_dir in task_dirs:
        for backup in sorted(task_dir.iterdir()):
            try:
                made = datetime.strptime(backup.name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            except ValueError:
                continue  # not ours: left alone
            if made.timestamp() < older_than and backup.is_dir() and not backup.is_symlink():
                shutil.rmtree(backup, ignore_errors=True)
                removed.append(backup)
        try:
            task_dir.rmdir()  # only when empty
        except OSError:
            pass
    return removed
