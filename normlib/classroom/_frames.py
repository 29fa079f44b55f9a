"""The grader's protocol with a sandbox: length-prefixed JSON frames on a pipe.

A frame is 4 bytes (big-endian length) and that many bytes of UTF-8 JSON. The grader sends jobs
and reads records; the sandbox reads jobs and sends records. Only JSON crosses (never a pickle,
which could run code in the grader), and a frame longer than ``MAX_FRAME`` ends the exchange.
"""

from __future__ import annotations

import json
import os
import struct

__all__ = ["MAX_FRAME", "MAX_JOB", "encode", "read_frame", "FrameBuffer"]

MAX_FRAME = 2**20          # a record: one answer's verdict, messages, ✓/✗ lines and 2,000 printed chars
MAX_JOB = 16 * 2**20       # a job: the answer cell and the cells before it (the grader caps both)
_HEADER = struct.Struct(">I")


def encode(message: dict, limit: int = MAX_FRAME) -> bytes:
    data = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(data) > limit:
        raise ValueError(f"frame of {len(data)} bytes, more than its limit ({limit})")
    return _HEADER.pack(len(data)) + data


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int = MAX_JOB) -> dict | None:
    """The next frame on a blocking ``fd`` as a dict; None at end of file. (The sandbox's side:
    the grader is trusted, so a bad frame from it is a plain error.)"""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    (n,) = _HEADER.unpack(header)
    if n > limit:
        raise ValueError(f"frame of {n} bytes, more than its limit ({limit})")
    data = _read_exactly(fd, n)
    if data is None:
        return None
    return json.loads(data.decode("utf-8", "surrogatepass"))


class FrameBuffer:
    """The grader's side: bytes read from a non-blocking pipe go in, whole frames (as bytes, not
    yet parsed: the sandbox is not trusted) come out. ``ValueError`` once a frame announces more
    than ``MAX_FRAME`` bytes."""

    def __init__(self):
        self.data = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self.data += chunk
        frames = []
        while len(self.data) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self.data)
            if n > MAX_FRAME:
                raise ValueError(f"the sandbox announced a frame of {n} bytes "
                                 f"(at most {MAX_FRAME})")
            if len(self.data) < _HEADER.size + n:
                break
            frames.append(bytes(self.data[_HEADER.size:_HEADER.size + n]))
            del self.data[:_HEADER.size + n]
        return frames
