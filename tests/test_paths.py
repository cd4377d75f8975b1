"""Task folders and scripts stay inside the home folder unless scheduler.yaml allows more."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdcron.settings.config import Config
from mdcron.tasks.paths import PathError, resolve_inside, script_path, task_cwd
from mdcron.tasks.task import Task


@pytest.fixture
def config(home: Path) -> Config:
    return Config(home=home.resolve(), cwd_policies={"repo": "work/repo", "tmp": "/tmp"})


def make(**fields: object) -> Task:
    values: dict = {"id": "t", "path": Path("/x/t.md"), "schedule": "@daily", "title": "t"}
    values.update(fields)
    return Task(**values)


def test_inside_and_outside(home: Path) -> None:
    h = home.resolve()
    assert resolve_inside(h, "a/b", home=h) == h / "a" / "b"
    assert resolve_inside(h / "a", "../c", home=h) == h / "c"
    assert resolve_inside(h, ".", home=h) == h
    with pytest.raises(PathError, match=r"'\.\./x' \(= .*\) escapes the home folder .*"
                       "allow_outside_home in scheduler.yaml"):
        resolve_inside(h, "../x", home=h)
    with pytest.raises(PathError, match="escapes"):
        resolve_inside(h, "/etc", home=h)


def test_a_sibling_with_a_common_prefix_is_outside(home: Path) -> None:
    h = home.resolve()
    with pytest.raises(PathError):
        resolve_inside(h, str(h) + "-evil", home=h)


def test_allowed_folders(tmp_path: Path, home: Path) -> None:
    h = home.resolve()
    out = (tmp_path / "srv").resolve()
    assert resolve_inside(h, str(out / "x"), home=h, allowed=[str(out)]) == out / "x"


def test_symlinks_are_followed(tmp_path: Path, home: Path) -> None:
    h = home.resolve()
    (h / "link").symlink_to(tmp_path)
    with pytest.raises(PathError, match="escapes"):
        resolve_inside(h, "link/file", home=h)
    (h / "loop").symlink_to(h / "loop")
    with pytest.raises(PathError):
        resolve_inside(h, "loop/x", home=h)


def test_bad_input(home: Path) -> None:
    for bad in ("", "  ", "a\x00b"):
        with pytest.raises(PathError):
            resolve_inside(home, bad, home=home)


def test_task_cwd(config: Config) -> None:
    h = config.home
    assert task_cwd(make(), config) == h
    assert task_cwd(make(cwd="jobs"), config) == h / "jobs"
    assert task_cwd(make(cwd_policy="repo"), config) == h / "work" / "repo"
    with pytest.raises(PathError, match="unknown cwd_policy 'nope'.*repo, tmp"):
        task_cwd(make(cwd_policy="nope"), config)
    with pytest.raises(PathError, match="escapes"):
        task_cwd(make(cwd_policy="tmp"), config)


def test_script_path(config: Config) -> None:
    h = config.home
    (h / "jobs").mkdir()
    (h / "jobs" / "run it.sh").write_text("#!/bin/sh\n")
    task = make(run_as="script", cwd="jobs", command="'./run it.sh' --fast")
    assert script_path(task, config) == h / "jobs" / "run it.sh"
    with pytest.raises(PathError, match="not found"):
        script_path(make(run_as="script", command="missing.sh"), config)
    with pytest.raises(PathError, match="not a file"):
        script_path(make(run_as="script", command="jobs"), config)
    with pytest.raises(PathError, match="cannot be split"):
        script_path(make(run_as="script", command="'unclosed"), config)
    with pytest.raises(PathError, match="empty"):
        script_path(make(run_as="script", command="  "), config)
