"""Writing a fixed file back without changing anything about the file but its text.

- A symbolic link stays a link: the file it points to (``os.path.realpath``) is rewritten.
- The usual way is atomic: a temporary file beside the target, given the target's mode, owner
  and group, then renamed over it. A file whose owner or group we cannot give to the temporary
  file (someone else's file, writable through a shared directory) is refused: a rename would
  hand it to us and could lock its owner out.
- A file with several hard links is rewritten in place instead, because a rename would give only
  this name the new text and split it from its other names. In-place is not atomic; the new
  bytes are encoded before the file is touched, and on a write error the old bytes are put back.
"""
from __future__ import annotations

import os
import stat


class WriteRefused(Exception):
    """Writing would change what the file is (owner, links); the file was left as it was."""


def write_preserving(path: str, text: str, encoding: str) -> None:
    """Replace the text of ``path``; raise OSError when writing failed (the file is intact) and
    :class:`WriteRefused` when it was not attempted."""
    target = os.path.realpath(path)
    info = os.stat(target)
    data = text.encode(encoding)  # an encoding error surfaces before anything is written
    if info.st_nlink > 1:
        _write_in_place(target, data)
    else:
        _write_by_rename(target, data, info)


def _write_by_rename(target: str, data: bytes, info: os.stat_result) -> None:
    import tempfile  # fix only

    fd, tmp = tempfile.mkstemp(prefix=".flake8-xla-", suffix=".tmp", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            mine = os.fstat(f.fileno())
            if (mine.st_uid, mine.st_gid) != (info.st_uid, info.st_gid):
                try:
                    os.fchown(f.fileno(), info.st_uid, info.st_gid)
                except PermissionError:
                    raise WriteRefused(
                        f"not written: it belongs to uid {info.st_uid} gid {info.st_gid}, and a rewritten copy "
                        f"would belong to uid {mine.st_uid} gid {mine.st_gid} (run as its owner, or as root)"
                    ) from None
            os.fchmod(f.fileno(), stat.S_IMODE(info.st_mode))  # after fchown, which may clear setuid bits
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_in_place(target: str, data: bytes) -> None:
    with open(target, "r+b") as f:
        old = f.read()
        try:
            f.seek(0)
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        except OSError:
            f.seek(0)
            f.write(old)
            f.truncate()
            f.flush()
            raise


NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(old_lines, new_lines, old_name: str, new_name: str) -> str:
    """A unified diff `git apply` and `patch` accept: a last line without its ending gets the
    ``\\ No newline at end of file`` marker (difflib would glue the next diff line onto it)."""
    import difflib  # --diff only

    out = []
    for line in difflib.unified_diff(old_lines, new_lines, old_name, new_name):
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n" + NO_NEWLINE)
    return "".join(out)
