"""Folders and files that only this user can change: where cuweave keeps what it later trusts (compiled kernels it
loads and runs, a rendezvous file whose contents join a communicator).

The rule is ssh's for its keys: a path is trusted when it, and every folder above it, is owned by this user or by
root and cannot be written by group or others, except a folder with the sticky bit (such as /tmp), where others may
add entries but not rename or remove ours. Anyone who could write such a path could put their own code or id there.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
import tempfile


def _untrusted_entry(path: pathlib.Path, info: os.stat_result) -> str | None:
    """Why one path's owner or mode lets someone else change it, or None."""
    if info.st_uid not in (os.geteuid(), 0):
        return f"{path} is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}) or root"
    if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
        return None
    if info.st_mode & stat.S_IWOTH:
        return f"{path} can be written by others (mode {stat.S_IMODE(info.st_mode):o})"
    if info.st_mode & stat.S_IWGRP and not _private_group(info.st_gid):
        return f"{path} can be written by its group, gid {info.st_gid} (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _private_group(gid: int) -> bool:
    """Whether `gid` is this user's own group (the scheme of a group per user, where the umask is often 002, so
    folders are group-writable): this user's primary group, with no other member."""
    if gid != os.getegid():
        return False
    try:
        import grp
        import pwd

        members = set(grp.getgrgid(gid).gr_mem)
        user = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return False
    return members <= {user} and all(p.pw_gid != gid or p.pw_uid == os.geteuid() for p in pwd.getpwall())


def untrusted_reason(path: os.PathLike[str] | str) -> str | None:
    """Why `path` (a file or folder that exists) could have been changed by another user, or None if it could not:
    it and each folder above it are owned by this user or root, and none of them can be written by others, or by a
    group other than this user's own (a sticky folder, like /tmp, excepted). Symbolic links are followed, and the folders they lead to are checked."""
    resolved = pathlib.Path(os.path.realpath(path))
    for entry in reversed([resolved, *resolved.parents]):
        try:
            info = entry.stat()
        except OSError as error:
            return f"{entry} cannot be examined ({error.strerror})"
        reason = _untrusted_entry(entry, info)
        if reason is not None:
            return reason
    return None


def make_private_folder(path: os.PathLike[str] | str) -> pathlib.Path:
    """Makes the folder `path`, and the missing folders above it, readable and writable by this user alone (0700),
    whatever the umask. A folder that exists is left as it is (untrusted_reason() judges it: narrowing it now would
    not undo what someone may have put there). Raises OSError if it cannot be made."""
    folder = pathlib.Path(path)
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    for entry in reversed(missing):
        try:
            entry.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile, by another process of ours or someone else's: judged later
            continue
        os.chmod(entry, 0o700)  # mkdir's mode is masked by the umask
    return folder


def write_private_file(path: os.PathLike[str] | str, data: bytes) -> None:
    """Writes `data` to `path` whole (a reader never sees part of it), readable and writable by this user alone
    (0600, whatever the umask), through a new file in the same folder that is then renamed over `path`."""
    target = pathlib.Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent)  # mkstemp makes it 0600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
