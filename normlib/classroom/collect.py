"""Collect: a snapshot of every student's practice notebooks, the folder ``grade`` reads.

    python -m normlib.classroom collect HOMES --out SUBMISSIONS [--deadline ISO-8601]
        [--course course] [--prefix jupyter-]

HOMES holds one folder per student, as a hub's home directories do (the trial hub's
``build/hub/homes/<user>``; TLJH's ``/home/jupyter-<user>``, with ``--prefix jupyter-``), and the
course where the links put it: ``HOMES/<prefix><student>/<course>/practice/``. Each practice
notebook (and ``zh/``) is copied to ``SUBMISSIONS/<student>/``, keeping its modification time,
which is the submitted-at time ``grade`` reads. Grading the snapshot twice gives the same result,
whatever the students do afterwards.

Late work: a notebook saved after ``--deadline`` is still copied and counted late (``grade``
marks its row late and leaves the points to the lecturer's policy). The time is what the file
system says: a student with a terminal can set it, so for assessed work run ``collect`` at the
deadline (``at``, ``cron``) and turn terminals off (docs/classroom.md).

A student's home is theirs, and the collector may run as root: no symbolic link is ever followed
(every folder and file is opened with O_NOFOLLOW relative to its parent's descriptor), only
regular files up to the grader's size limit are copied, and SUBMISSIONS is the lecturer's alone
(0700, files 0600), outside any git work tree unless ``--inside-git``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .assignment import utc_iso, versioned
from .grade import refuse_inside_git, student_id
from .notebooks import MAX_NOTEBOOK_BYTES
from .report import private_file, private_folder

__all__ = ["collect", "Collected", "MANIFEST"]

MANIFEST = "collected.json"     # what was collected when; grade reads its deadline


@dataclass
class Collected:
    """What a collection found: per student the files copied (late ones apart), and the homes
    that had no course folder or could not be read (with why)."""

    files: dict = field(default_factory=dict)        # student -> [relative paths]
    late: dict = field(default_factory=dict)         # student -> [relative paths]
    skipped: dict = field(default_factory=dict)      # student or home -> why


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def _copy(src_dir: int, name: str, dest: Path) -> datetime | None:
    """Copy the regular file ``name`` (no link, no FIFO, not over the size limit) into ``dest``
    with its modification time; that time, or None when it was not a file to copy."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_dir)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_NOTEBOOK_BYTES:
            return None
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    with private_file(dest, newline="") as out:
        out.buffer.write(data)
    os.utime(dest, ns=(info.st_mtime_ns, info.st_mtime_ns))
    return datetime.fromtimestamp(info.st_mtime, UTC)


def collect(homes: Path, out: Path, *, deadline: datetime | None = None, course: str = "course",
            prefix: str = "", inside_git: bool = False) -> Collected:
    """Snapshot ``homes/<prefix><student>/<course>/practice/`` into ``out/<student>/`` (see the
    module docstring); ``out`` must be new or empty."""
    homes, out = Path(homes), Path(out)
    if not homes.is_dir():
        raise ValueError(f"collect: HOMES must be a folder of home folders, got {homes}")
    if not course or "/" in course or course in (".", ".."):
        raise ValueError(f"collect --course: expected the course folder's name in each home "
                         f"(the repository's name, e.g. course), got {course!r}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"collect --out: expected a new or empty folder, got {out}: a snapshot "
                         "is never mixed with another")
    refuse_inside_git(out, "collect --out", inside_git)
    found = Collected()
    private_folder(out)
    with os.scandir(homes) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.startswith(prefix):
            continue
        student = student_id(entry.name[len(prefix):])
        if not student or student.startswith("."):
            continue
        where = f"{prefix}{student}/{course}/practice"
        fds = []
        try:
            fds.append(_open_dir(entry.path))
            fds.append(_open_dir(course, fds[-1]))
            fds.append(_open_dir("practice", fds[-1]))
        except OSError as exc:
            found.skipped[student] = f"no {where} ({exc.strerror})"
            for fd in fds:
                os.close(fd)
            continue
        try:
            places = [("", fds[-1])]
            try:
                places.append(("zh", _open_dir("zh", fds[-1])))
            except OSError:
                pass
            for sub, fd in places:
                target = out / student / sub
                for name in sorted(os.listdir(fd)):
                    if versioned(name) is None:
                        continue
                    private_folder(out / student)      # a parent made by mkdir is not 0700
                    private_folder(target)
                    when = _copy(fd, name, target / name)
                    if when is None:
                        continue
                    rel = f"{sub}/{name}" if sub else name
                    found.files.setdefault(student, []).append(rel)
                    if deadline is not None and when > deadline:
                        found.late.setdefault(student, []).append(rel)
                if sub:
                    os.close(fd)
        finally:
            for fd in fds:
                os.close(fd)
    with private_file(out / MANIFEST) as f:
        json.dump({"collected_at": utc_iso(datetime.now(UTC)),
                   "deadline": deadline.isoformat() if deadline else None,
                   "homes": str(homes.resolve()), "course": course, "prefix": prefix,
                   "files": found.files, "late": found.late, "skipped": found.skipped},
                  f, ensure_ascii=False, indent=1)
    return found


def collected_deadline(submissions: Path) -> datetime | None:
    """The deadline a collection was made at (its collected.json), or None."""
    try:
        with open(Path(submissions) / MANIFEST, encoding="utf-8") as f:
            when = json.load(f).get("deadline")
        return datetime.fromisoformat(when) if isinstance(when, str) else None
    except (OSError, ValueError, AttributeError):
        return None
