"""Input files read whole (prompts, exemplars, grammars): regular files of a bounded size, so that a FIFO named
where a prompt goes does not hang a run and `/dev/zero` does not fill the memory."""

import errno
import os
import stat
from pathlib import Path

# The most a prompt, exemplars or grammar file may hold: the largest the references ship is about 0.2 MB.
PROMPT_LIMIT = 8 << 20

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}  # fmt: skip


def read_whole(path: str | Path, limit: int = PROMPT_LIMIT) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Anything else is an OSError whose `strerror` says
    what the path is in words (`a FIFO, not a regular file`; `9,000,000 bytes, more than 8,388,608`), so that
    a caller's `cannot read FILE: {error.strerror}` names it. Opened without waiting: a FIFO is refused, not read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{_KINDS.get(stat.S_IFMT(mode), 'not a file')}, not a regular file")
        chunks, size = [], 0
        while chunk := os.read(descriptor, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise OSError(errno.EFBIG, f"more than {limit:,} bytes, the most such a file may hold")
        return b"".join(chunks)
    finally:
        os.close(descriptor)
