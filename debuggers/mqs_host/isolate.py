"""The DLL in a helper process of its own, its callbacks served by the
debugger over two pipes.

A DLL runs native code on the debugger's behalf: one that dereferences a
bad pointer, aborts or never returns would take the debugger (and the
user's session) with it. So by default the debugger starts a helper (a
plain python3 running this file), which loads mqs's host library and with
it the DLL (host.py), and answers each of its questions (memory, symbols,
types) from its own tables while it waits. A helper that dies or falls silent is reported as an error
naming the entry point it was in; the debugger lives on.

The protocol: frames of a 5-byte header (op, payload length) and a payload.
The debugger sends the job first (JSON); the helper then sends requests,
each answered by one reply frame, one-way notes ("calling ENTRY POINT"),
and finally the result (JSON).
"""

import json
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time

from . import host

_HEADER = struct.Struct("<BI")

JOB = ord("j")
READ = ord("r")
SYMBOL = ord("s")
TYPE = ord("t")
FIELD = ord("f")
SIZEOF = ord("z")
CALLING = ord("c")
RESULT = ord("d")
FAILED = ord("e")
REPLY = ord("a")

# How long the DLL may go without a word (a call into it returning, or a
# callback) before it is taken for hung.
DEFAULT_SILENCE = 60.0


class Closed(Exception):
    """The other side went away."""


def _read_exact(fd, size, deadline=None):
    chunks = []
    while size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, size)
        if not chunk:
            raise Closed
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd, op, payload=b""):
    _write_all(fd, _HEADER.pack(op, len(payload)) + payload)


def receive(fd, deadline=None):
    op, size = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return op, _read_exact(fd, size, deadline)


# ---- The helper's side -------------------------------------------------------


class _PipeService:
    """host.Service answered by the debugger at the other end of the pipes."""

    def __init__(self, requests, replies):
        self.requests = requests
        self.replies = replies

    def _ask(self, op, payload):
        send(self.requests, op, payload)
        kind, answer = receive(self.replies)
        if kind != REPLY:
            raise Closed
        return answer

    def read(self, process, addr, size):
        answer = self._ask(READ, struct.pack("<IQI", process, addr, size))
        if answer[:1] == b"\0":
            return answer[1:]
        raise host.Unreadable(answer[1:].decode("utf-8", "replace"))

    def find_symbol(self, image, name, function):
        answer = self._ask(SYMBOL, struct.pack("<IB", image, function) + name.encode())
        found, value = struct.unpack("<BQ", answer)
        return value if found else None

    def find_type(self, image, name):
        (type_id,) = struct.unpack("<q", self._ask(TYPE, struct.pack("<I", image) + name.encode()))
        return None if type_id < 0 else type_id

    def field_offset(self, type_id, name):
        (offset,) = struct.unpack("<q", self._ask(FIELD, struct.pack("<q", type_id) + name.encode()))
        return None if offset < 0 else offset

    def sizeof(self, type_id):
        (size,) = struct.unpack("<q", self._ask(SIZEOF, struct.pack("<q", type_id)))
        return None if size < 0 else size

    def calling(self, entry_point):
        send(self.requests, CALLING, entry_point.encode())


def helper_main(requests, replies):
    """The helper: reads the job, dumps, sends the result."""
    op, payload = receive(replies)
    if op != JOB:
        return 2
    job = json.loads(payload)
    service = _PipeService(requests, replies)
    try:
        result = host.dump(job["library"], job["dll"], job["processes"], service)
    except host.HostError as e:
        send(requests, FAILED, json.dumps({"error": str(e)}).encode())
        return 0
    # What the DLL printed by itself went to our stdout and stderr, which
    # the debugger reads from a file: flush what C's stdio still holds.
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except OSError:
        pass
    send(requests, RESULT, encode_result(result))
    return 0


def encode_result(result):
    """host.dump's result as a frame: a line of JSON, then the dumps' JSON
    texts a line each (never parsed or escaped again)."""
    head = {k: v for k, v in result.items() if k != "dumps"}
    return "\n".join([json.dumps(head)] + result["dumps"]).encode()


def decode_result(payload):
    head, *dumps = payload.decode("utf-8", "replace").split("\n")
    result = json.loads(head)
    result["dumps"] = dumps
    return result


# ---- The debugger's side -----------------------------------------------------


def python_program():
    """A python3 to run the helper with: MQS_PYTHON, the interpreter the
    debugger embeds (its installation's binary), else python3 on PATH."""
    explicit = os.environ.get("MQS_PYTHON")
    if explicit:
        return explicit
    version = "python%d.%d" % sys.version_info[:2]
    for prefix in (sys.base_exec_prefix, sys.exec_prefix, "/usr"):
        candidate = os.path.join(prefix, "bin", version)
        if os.access(candidate, os.X_OK):
            return candidate
    return "python3"


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


class DllFailure(Exception):
    """The helper died or hung; the text says where."""


def run_isolated(library, dll_path, descriptions, answer, silence=DEFAULT_SILENCE):
    """Dumps the described processes with the DLL in a helper (which loads
    the host `library`); `answer` serves the requests (a host.Service of
    the debugger's). Returns what host.dump returns, plus "dll_output"
    (what the DLL printed)."""
    to_helper_r, to_helper_w = os.pipe()
    from_helper_r, from_helper_w = os.pipe()
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    output = tempfile.TemporaryFile()
    code = ("import sys; sys.path.insert(0, %r); from mqs_host import isolate; "
            "sys.exit(isolate.helper_main(%d, %d))" % (package, from_helper_w, to_helper_r))
    try:
        helper = subprocess.Popen(
            [python_program(), "-I", "-c", code],
            stdin=subprocess.DEVNULL, stdout=output, stderr=output,
            pass_fds=(from_helper_w, to_helper_r), close_fds=True,
            # Its own process group: the user's ^C goes to the debugger,
            # which ends the helper itself.
            start_new_session=True)
    except OSError as e:
        for fd in (to_helper_r, to_helper_w, from_helper_r, from_helper_w):
            os.close(fd)
        raise host.HostError("cannot start the DLL's helper process (%s): %s; set MQS_PYTHON "
                             "to a python3, or use --in-process" % (python_program(), e))
    os.close(from_helper_w)
    os.close(to_helper_r)
    entry_point = "loading the DLL"
    try:
        send(to_helper_w, JOB, json.dumps(
            {"library": library, "dll": dll_path, "processes": descriptions}).encode())
        while True:
            try:
                op, payload = receive(from_helper_r, time.monotonic() + silence)
            except TimeoutError:
                raise DllFailure("the DLL did not answer for %d s (in %s): ended it"
                                 % (silence, entry_point)) from None
            except Closed:
                status = helper.wait(timeout=10)
                how = ("died of %s" % signal_name(-status) if status < 0
                       else "exited with status %d" % status)
                raise DllFailure("the DLL %s in %s%s" % (
                    how, entry_point, _last_words(output))) from None
            if op == CALLING:
                entry_point = payload.decode("utf-8", "replace")
                continue
            if op == RESULT:
                result = decode_result(payload)
                result["dll_output"] = _lines(output)
                return result
            if op == FAILED:
                raise host.HostError(json.loads(payload)["error"])
            send(to_helper_w, REPLY, _serve(answer, op, payload))
    finally:
        os.close(to_helper_w)
        os.close(from_helper_r)
        if helper.poll() is None:
            helper.kill()
        helper.wait()
        output.close()


def _lines(output):
    output.seek(0)
    text = output.read(1 << 20).decode("utf-8", "replace")
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _last_words(output):
    lines = _lines(output)
    return "; it printed: %s" % " | ".join(lines[-3:]) if lines else ""


def _serve(answer, op, payload):
    """One request of the helper, answered by the debugger's service."""
    try:
        if op == READ:
            process, addr, size = struct.unpack("<IQI", payload)
            try:
                return b"\0" + bytes(answer.read(process, addr, size))
            except host.Unreadable as e:
                return b"\1" + str(e).encode()
        if op == SYMBOL:
            image, function = struct.unpack("<IB", payload[:5])
            value = answer.find_symbol(image, payload[5:].decode(), bool(function))
            return struct.pack("<BQ", value is not None, value or 0)
        if op == TYPE:
            (image,) = struct.unpack("<I", payload[:4])
            type_id = answer.find_type(image, payload[4:].decode())
            return struct.pack("<q", -1 if type_id is None else type_id)
        if op == FIELD:
            (type_id,) = struct.unpack("<q", payload[:8])
            offset = answer.field_offset(type_id, payload[8:].decode())
            return struct.pack("<q", -1 if offset is None else offset)
        if op == SIZEOF:
            (type_id,) = struct.unpack("<q", payload)
            size = answer.sizeof(type_id)
            return struct.pack("<q", -1 if size is None else size)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 (a debugger's error is an answer)
        if op == READ:
            return b"\1" + ("%s" % e).encode()
        if op == SYMBOL:
            return struct.pack("<BQ", 0, 0)
        return struct.pack("<q", -1)
    raise DllFailure("the helper sent an unknown request %d" % op)
