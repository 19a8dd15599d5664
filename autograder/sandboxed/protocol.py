"""The protocol between the sandbox and the grader: framing, message kinds, version.

Everything that crosses the trust boundary is a *frame*: a 4-byte big-endian length, then one
UTF-8 JSON object. Every message the course's own code sends names its ``kind`` and carries
``"v": VERSION``; the grader refuses a message of another version (a fork server left over
from another checkout, or a forgery) and says so.

Three conversations use it:

- **control** (grader ↔ fork server, trusted on both ends): ``hello`` once; then fixed-size
  ``COMMAND``s: ``START_JOB`` (answered by passing three file descriptors: the job's frame pipe,
  its status socket and its *request pipe*) or ``WARM`` followed by a small JSON body (notebook
  names and a seed, answered by ``warmed``). A job's request, ``{"job": …}`` (a notebook's cells)
  or ``{"replay": …}`` (a submission's recordings), never crosses this socket: the grader writes
  it into the job's own request pipe, and only the job's middle process, forked before, reads it.
  So the fork server, the parent of every later job, never holds a student's bytes
  (``SECURITY.md``, "No job's address space contains another submission's bytes").
- **job** (student process → grader; the student's code can write on the same pipe, so every
  message is checked, ``autograder.engine.sandbox.Conversation``): ``start`` first, then per cell in
  order ``cell`` (a code cell raised) or ``evidence`` (an exercise's *recording*, see
  ``record.py``; a quantization spec in it is encoded by ``selfcheck.evidence.encode_spec``, the same
  encoding the evidence uses, and decoded by ``replay.Replay.spec`` alone), then, at the job's ``practice``
  cell if it has one, ``practiced`` (each practice the student defined → whether it passed; it changes no
  score, the class report counts it), then ``done`` last.
- **replay** (replay worker → grader; no student code runs there, but it reads recordings a
  student controlled, so it is confined the same way and checked the same way): ``start``,
  then ``derived`` per exercise (the evidence, plain data, or an ``error``), then ``done``.
"""

from __future__ import annotations

import json
import struct
from typing import Any

VERSION = 5
"""Bump when a message changes shape; both sides of one checkout always agree. (3: a spec inside a recording
is ``selfcheck.evidence.encode_spec``'s, with the evidence's key names; 4: a job's request goes through its own
request pipe, the control socket carries fixed-size commands; 5: ``practiced``.)"""

HEADER = struct.Struct(">I")
COMMAND = struct.Struct(">4sI")
"""A control command: its kind, then a number (the size of the body that follows a ``WARM``; 0 otherwise)."""
START_JOB, WARM = b"JOB.", b"WARM"
MAX_WARM_BYTES = 64 * 1024
"""A warm-up body holds notebook names and a seed: anything larger is not one."""
MAX_REQUEST_BYTES = 256 * 1024 * 1024
"""A job's request (its cells, or its recordings) at most, read by its middle process from its request pipe."""
MAX_FRAME_BYTES = 8 * 1024 * 1024
"""One frame's body at most; a larger one ends the reading as a flood."""

HELLO, WARMED = "hello", "warmed"
START, CELL, EVIDENCE, PRACTICED, DONE = "start", "cell", "evidence", "practiced", "done"
DERIVED = "derived"
KINDS = frozenset({HELLO, WARMED, START, CELL, EVIDENCE, PRACTICED, DONE, DERIVED})


class ProtocolError(ValueError):
    """A frame that is not a message of this protocol and version."""


def message(kind: str, **fields: Any) -> dict[str, Any]:
    """A message of ``kind`` with its version."""
    if kind not in KINDS:
        raise ValueError(f"unknown message kind {kind!r}")
    return {"type": kind, "v": VERSION, **fields}


def encode(data: dict[str, Any]) -> bytes:
    """One message (or a control request) as a frame: length, then UTF-8 JSON."""
    body = json.dumps(data, ensure_ascii=False).encode("utf-8")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    """The message in one frame's body; ``ProtocolError`` if it is not one of this version."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ProtocolError("not a message")
    if data.get("v") != VERSION:
        raise ProtocolError(f"version {str(data.get('v'))[:20]} (this grader speaks {VERSION})")
    if data["type"] not in KINDS:
        raise ProtocolError(f"unknown kind {data['type'][:40]}")
    return data
