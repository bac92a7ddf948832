"""The host, loaded as a library: libmqs_debugger.so (host/mqs-debugger).

mqs's host is written once, in Rust: the library drives the message-queue
DLL through the same session as mqs-dump and prints with the same
renderer. This module only binds it with ctypes: the debugger's answers
(memory, symbols, types, from a `Service`) become the library's table of
C functions, and its JSON comes back as Python values.

Nothing raised in a callback ever reaches the library's frames: every
callback catches everything and answers "not found" or "unreadable"; what
it caught is kept in `callback_errors`, and a ^C is raised again once the
library returns.
"""

import ctypes
import json
import os

PAGE = 4096
LIBRARY = "libmqs_debugger.so"
# Errors raised in the debugger's answers, kept for the report.
_CALLBACK_ERRORS_KEPT = 16


class HostError(Exception):
    """A failure to report to the user as one line."""


class Unreadable(Exception):
    """Target memory that cannot be read; the text says why."""


class Service:
    """What the debugger answers about its processes (by index) and their
    images (one per process, by the same index). Types are the service's
    own numbers. Every method may raise; the binding turns that into "not
    found" for the library."""

    def read(self, process, addr, size):
        """The `size` bytes at `addr`, or raise Unreadable."""
        raise NotImplementedError

    def find_symbol(self, image, name, function):
        """The address of a data symbol (or of a function), or None."""
        raise NotImplementedError

    def find_type(self, image, name):
        """A number for the named type (typedef, struct tag, `struct TAG`), or None."""
        raise NotImplementedError

    def field_offset(self, type_id, name):
        """The byte offset of a member (a path `a.b` through untagged ones), or None."""
        raise NotImplementedError

    def sizeof(self, type_id):
        """The size of the type in bytes, or None."""
        raise NotImplementedError

    def calling(self, entry_point):
        """The DLL is entered at this entry point (the helper process
        reports it, so that a crash is placed)."""


_READ = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64,
                         ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32)
_FIND_SYMBOL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p,
                                ctypes.c_int, ctypes.POINTER(ctypes.c_uint64))
_FIND_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p,
                              ctypes.POINTER(ctypes.c_uint64))
_FIELD_OFFSET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p,
                                 ctypes.POINTER(ctypes.c_uint64))
_SIZE_OF = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                            ctypes.POINTER(ctypes.c_uint64))
_CALLING = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


class _Answers(ctypes.Structure):
    """host/mqs-debugger/src/answers.rs's `Answers`."""
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("read", _READ),
        ("find_symbol", _FIND_SYMBOL),
        ("find_type", _FIND_TYPE),
        ("field_offset", _FIELD_OFFSET),
        ("size_of", _SIZE_OF),
        ("calling", _CALLING),
    ]


_loaded = {}


def load(path):
    """The library at `path`, loaded once."""
    real = os.path.realpath(path)
    if real not in _loaded:
        try:
            lib = ctypes.CDLL(real, mode=os.RTLD_NOW | os.RTLD_LOCAL)
            for name in ("mqs_debugger_plan", "mqs_debugger_dump"):
                function = getattr(lib, name)
                function.restype = ctypes.c_int
                function.argtypes = (ctypes.c_char_p, ctypes.POINTER(_Answers),
                                     ctypes.POINTER(ctypes.c_void_p))
            lib.mqs_debugger_render.restype = ctypes.c_int
            lib.mqs_debugger_render.argtypes = (ctypes.c_char_p, ctypes.c_int,
                                                ctypes.POINTER(ctypes.c_void_p))
            lib.mqs_debugger_free.restype = None
            lib.mqs_debugger_free.argtypes = (ctypes.c_void_p,)
        except (OSError, AttributeError) as e:
            raise HostError("mqs's debugger library %s: not loadable: %s; build it "
                            "(cargo build -p mqs-debugger) or set MQS_DEBUGGER_LIB to one"
                            % (path, e)) from None
        _loaded[real] = lib
    return _loaded[real]


def _call(lib, function, *args):
    """Calls an entry point that answers a string; (rc, the string)."""
    out = ctypes.c_void_p()
    rc = function(*args, ctypes.byref(out))
    try:
        text = ctypes.string_at(out.value).decode("utf-8", "replace") if out.value else ""
    finally:
        lib.mqs_debugger_free(out)
    return rc, text


class _Binding:
    """A Service as the library's table, for one call."""

    def __init__(self, service):
        self.service = service
        self.errors = []
        self.interrupted = False
        self.table = _Answers(None, _READ(self.read), _FIND_SYMBOL(self.find_symbol),
                              _FIND_TYPE(self.find_type), _FIELD_OFFSET(self.field_offset),
                              _SIZE_OF(self.size_of), _CALLING(self.calling))

    def guarded(self, name, body, *args):
        """Runs an answer; anything it raises becomes "no answer"."""
        if self.interrupted:
            return 1
        try:
            return body(*args)
        except KeyboardInterrupt:
            # The library finishes quickly once nothing is answered; the
            # interrupt is raised again when it returns.
            self.interrupted = True
        except Exception as e:  # noqa: BLE001 (a debugger's error is an answer)
            if len(self.errors) < _CALLBACK_ERRORS_KEPT:
                self.errors.append("%s: %s: %s" % (name, type(e).__name__, e))
        return 1

    def read(self, _context, process, addr, size, buf, why, why_len):
        def body():
            try:
                data = bytes(self.service.read(process, addr, size))
            except Unreadable as e:
                text = str(e).encode("utf-8", "replace")[:why_len - 1] + b"\0"
                ctypes.memmove(why, text, len(text))
                return 1
            if len(data) != size:
                raise Unreadable("the debugger read %d of %d bytes" % (len(data), size))
            ctypes.memmove(buf, data, size)
            return 0
        return self.guarded("fetch", body)

    @staticmethod
    def _out(value, out):
        if value is None:
            return 1
        out[0] = value
        return 0

    def find_symbol(self, _context, image, name, function, out):
        return self.guarded("find_symbol", lambda: self._out(
            self.service.find_symbol(image, name.decode(), bool(function)), out))

    def find_type(self, _context, image, name, out):
        return self.guarded("find_type", lambda: self._out(
            self.service.find_type(image, name.decode()), out))

    def field_offset(self, _context, type_id, name, out):
        return self.guarded("field_offset", lambda: self._out(
            self.service.field_offset(type_id, name.decode()), out))

    def size_of(self, _context, type_id, out):
        return self.guarded("sizeof", lambda: self._out(self.service.sizeof(type_id), out))

    def calling(self, _context, entry_point):
        self.guarded("calling", lambda: self.service.calling(entry_point.decode()))


def plan(library, dll_path, trust_dll, by_default, descriptions, service):
    """Which DLL reads each described process (dicts: pid, executable,
    pointer_size, local_live), and its rank, found as mqs-dump finds them:
    `dll_path`, else the one each process names (checked for trust unless
    `trust_dll`). Runs no DLL. A list, per process, of {"global_rank",
    "dll", "chosen"} or {"global_rank", "error", "exit_code"}."""
    lib = load(library)
    binding = _Binding(service)
    request = json.dumps({"dll": dll_path, "trust_dll": bool(trust_dll),
                          "by_default": bool(by_default), "processes": descriptions}).encode()
    rc, text = _call(lib, lib.mqs_debugger_plan, request, ctypes.byref(binding.table))
    if binding.interrupted:
        raise KeyboardInterrupt
    if rc != 0:
        raise HostError(text)
    return json.loads(text)


def dump(library, dll_path, descriptions, service):
    """Dumps the described processes (as for `plan`, with their
    global_rank and chosen) with the DLL at `dll_path`, the debugger
    answering through `service`.

    Returns {"processes": [{"ok": true} or {"error": text, "exit_code": n}],
    "dumps": [each dump's JSON text, in order], "callback_errors": [...]};
    raises HostError when the DLL cannot be used at all. The dumps are
    handed on to `render` as they are: never parsed here."""
    lib = load(library)
    binding = _Binding(service)
    job = json.dumps({"dll": dll_path, "processes": descriptions}).encode()
    rc, text = _call(lib, lib.mqs_debugger_dump, job, ctypes.byref(binding.table))
    if binding.interrupted:
        raise KeyboardInterrupt
    if rc != 0:
        raise HostError(text)
    summary, *dumps = text.split("\n")
    return {"processes": json.loads(summary), "dumps": dumps,
            "callback_errors": binding.errors}


def render(library, dumps, failures, outputs, as_json):
    """mqs-dump's listing of these dumps (their JSON texts, as `dump` gave
    them): its text, or its --json document (with the failures). `outputs`
    pairs the index of a dump with what its DLL printed."""
    lib = load(library)
    listing = ('{"processes": [%s], "failures": %s, "dll_output": %s}'
               % (",".join(dumps), json.dumps(failures), json.dumps(outputs))).encode()
    rc, text = _call(lib, lib.mqs_debugger_render, listing, 1 if as_json else 0)
    if rc != 0:
        raise HostError(text)
    return text
