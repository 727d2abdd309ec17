"""The synthetic log's files: one node's lines of one chunk, buffered and rotated.

Each chunk streams to files of its own (``events-<node>-<stamp>-<seq>.jsonl``,
sequence numbers reserved per chunk), so chunks generated in parallel never
share a file and memory stays bounded whatever the size of the log.
"""

from __future__ import annotations

import os

__all__ = ["NodeFiles"]


class NodeFiles:
    """One node's files of one chunk: buffered, rotated every ``rotate`` lines."""

    def __init__(self, out_dir, node, stamp, first_seq, rotate):
        self.out_dir, self.node, self.stamp = out_dir, node, stamp
        self.seq = first_seq
        self.rotate = rotate
        self.lines: list[str] = []
        self.in_file = 0
        self.file = None
        self.names: list[str] = []
        self.written = 0

    def _open(self):
        if self.file is not None:
            self.file.close()
        name = f"events-{self.node}-{self.stamp}-{self.seq:04d}.jsonl"
        self.seq += 1
        self.names.append(name)
        self.file = open(os.path.join(self.out_dir, name), "w", encoding="utf-8", buffering=1 << 20)
        self.in_file = 0

    def flush(self):
        lines = self.lines
        while lines:
            if self.file is None or self.in_file >= self.rotate:
                self._open()
            take = min(len(lines), self.rotate - self.in_file)
            self.file.write("\n".join(lines[:take]))
            self.file.write("\n")
            self.in_file += take
            self.written += take
            lines = lines[take:]
        self.lines = []

    def close(self):
        self.flush()
        if self.file is not None:
            self.file.close()
            self.file = None

