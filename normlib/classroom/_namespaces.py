"""A student's own namespaces, made inside a worker's bubblewrap sandbox (Linux only, via libc).

bubblewrap builds the worker: a read-only system, no network, an empty environment, its own PID
namespace (sandbox.py). Inside it a server that imported torch once forks, for each student, a
process that calls ``enter_student_namespaces``: new user, PID, mount, network, IPC and UTS
namespaces; a private ``/tmp``; ``/proc`` covered by an empty tmpfs (a nested PID namespace may not
mount a proc of its own under bubblewrap's, and an answer needs no other process's files); then
every capability is dropped and no new privileges can be gained, so the covers cannot be lifted.
(Under the cover, ``/proc/cpuinfo`` alone: torch reads it.)
The next process it forks is PID 1 of the student's namespace: it sees no process outside it, and
when it ends the kernel ends everything in it.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["enter_student_namespaces", "drop_privileges", "staging_folders"]

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_MOVE, _MS_REC, _MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(s):
        return s.encode() if s is not None else None

    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data) if data else None),
           f"mount {target}")


def enter_student_namespaces(tmp_bytes: int, keep: list[str] = ()) -> None:
    """Unshare every namespace, map this uid to itself, make /tmp private (``keep``: read-only
    folders under /tmp, the Python environment of a clone in a temporary folder, bound into the
    new /tmp at their paths) and cover /proc. The caller forks next: its child is PID 1 of the
    new PID namespace."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET |
                         _CLONE_NEWIPC | _CLONE_NEWUTS), "unshare")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    # /proc's cover holds /proc/cpuinfo alone (read-only): torch reads it the first time it
    # meets a float16 or bfloat16 tensor
    stage = f"/tmp/.proc-{os.getpid()}"   # in the worker's /tmp: a name of this student's own
    os.mkdir(stage, 0o755)
    _mount("tmpfs", stage, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=16k,mode=0755")
    open(f"{stage}/cpuinfo", "w").close()
    _mount("/proc/cpuinfo", f"{stage}/cpuinfo", None, _MS_BIND)
    _mount(None, f"{stage}/cpuinfo", None,       # proc's own flags are locked: keep them
           _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _mount(None, stage, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _mount(stage, "/proc", None, _MS_MOVE)
    os.rmdir(stage)
    stage = f"/tmp/.student-{os.getpid()}"    # left in the worker's /tmp: staging_folders()
    os.mkdir(stage, 0o700)
    _mount("tmpfs", stage, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={tmp_bytes},mode=0700")
    for folder in keep:                    # read-only binds stay read-only (their flag is locked)
        inside = stage + folder[len("/tmp"):]
        os.makedirs(inside, exist_ok=True)
        _mount(folder, inside, None, _MS_BIND | _MS_REC)
    _mount(stage, "/tmp", None, _MS_MOVE)


def staging_folders(pid: int) -> list[str]:
    """The folders the student's process ``pid`` made in the worker's /tmp and could not remove
    (its new /tmp was moved over them): the worker's server removes them when it has ended."""
    return [f"/tmp/.proc-{pid}", f"/tmp/.student-{pid}"]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_privileges() -> None:
    """No capability left (bounding set included), and none to be gained (no_new_privs): the
    mounts above can no longer be changed."""
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break                           # EINVAL: past the last capability this kernel has
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")
