"""A host of the message-queue C contract (include/mpi_interface.h) in Python.

It loads a DLL with ctypes, hands it the callback tables of the MPI-1
interface (compatibility 2, which every MPI's DLL implements) and walks its
iterators into the dump model of mqs-dump's JSON (docs/json.md), following
the calling sequence of host/mqs-core/src/dll/session.rs. Whatever it learns of the
target comes from a `Service`: the debugger (gdb, lldb) answers memory,
symbols and types, either in this process or over a pipe from the helper
process that loads the DLL (isolate.py).

Nothing raised in a callback ever reaches the DLL's C frames: every callback
catches everything and answers an error code, as the Rust host's trampolines
do (host/mqs-core/src/dll/callbacks.rs).
"""

import ctypes
import os
import sys
import time

from . import mqs_abi

ABI = mqs_abi.mpi1
OK = ABI.mqs_ok
NO_INFORMATION = ABI.mqs_no_information
END_OF_LIST = ABI.mqs_end_of_list

# Bounds on what the host accepts from a DLL (as session.rs): a DLL that
# never says mqs_end_of_list cannot hang or exhaust the debugger.
MAX_COMMUNICATORS = 1 << 17
MAX_OPERATIONS = 1 << 22
MAX_GROUP = 1 << 24
# Unreadable reads kept per process, as the Rust host keeps them.
UNREADABLE_KEPT = 16

# The host's own codes, private to this side of the interface.
BAD_HANDLE = 100
BAD_ARGUMENT = 101
NOT_FOUND = 102
READ_FAILED = 103
INTERNAL = 104
_ERROR_TEXT = {
    0: b"mqs_ok",
    1: b"mqs_no_information",
    2: b"mqs_end_of_list",
    BAD_HANDLE: b"mqs host: unknown or stale handle passed to a callback",
    BAD_ARGUMENT: b"mqs host: NULL or out-of-range argument",
    NOT_FOUND: b"mqs host: no such symbol in the image",
    READ_FAILED: b"mqs host: target memory could not be read",
    INTERNAL: b"mqs host: internal error in a callback",
}

# The queues, in the order hosts ask for them, with the model's names.
OP_CLASSES = (
    (ABI.mqs_pending_sends, "sends"),
    (ABI.mqs_pending_receives, "receives"),
    (ABI.mqs_unexpected_messages, "unexpected"),
)

PAGE = 4096
# Pages of target memory kept during one dump (64 MiB): the target is
# stopped, so what was read stays true until the command ends.
CACHE_PAGES = 16384

CALLBACK_KINDS = (
    "find_type", "field_offset", "sizeof", "find_symbol", "find_function",
    "get_type_sizes", "fetch", "target_to_host", "get_global_rank",
    "get_image", "info", "job",
)


class HostError(Exception):
    """A failure to report to the user as one line."""


class Unreadable(Exception):
    """Target memory that cannot be read; the text says why."""


class Service:
    """What the debugger answers about its processes (by index) and their
    images (one per process, by the same index). Types are the service's
    own ids. Every method may raise; the host turns that into an error
    code for the DLL."""

    def read(self, process, addr, size):
        """The `size` bytes at `addr`, or raise Unreadable."""
        raise NotImplementedError

    def find_symbol(self, image, name, function):
        """The address of a data symbol (or of a function), or None."""
        raise NotImplementedError

    def find_type(self, image, name):
        """An id for the named type (typedef, struct tag, `struct TAG`), or None."""
        raise NotImplementedError

    def field_offset(self, type_id, name):
        """The byte offset of a top-level field, or None."""
        raise NotImplementedError

    def sizeof(self, type_id):
        """The size of the type in bytes, or None."""
        raise NotImplementedError

    def calling(self, entry_point):
        """The host is about to call this DLL entry point (the isolated
        helper reports it, so that a crash is placed)."""


def c_string(address):
    """The NUL-terminated string at a C address, as text (None for NULL)."""
    if not address:
        return None
    return ctypes.string_at(address).decode("utf-8", "replace")


def _chars(array):
    """A fixed C char array up to its first NUL, as text."""
    return bytes(array).split(b"\0", 1)[0].decode("utf-8", "replace")


# ---- Handles ---------------------------------------------------------------
#
# What the DLL gets as mqs_image*, mqs_process* and mqs_type* is the address
# of a small buffer of ours, so that even a DLL that looked inside would read
# valid memory; callbacks find the object back through this registry, and a
# pointer that is not in it is refused (a stale or corrupted handle).

_registry = {}


class _Handle:
    def __init__(self):
        self._cell = ctypes.create_string_buffer(16)
        self.address = ctypes.addressof(self._cell)
        _registry[self.address] = self

    def drop(self):
        _registry.pop(self.address, None)


def _resolve(address, kind):
    handle = _registry.get(address or 0)
    return handle if isinstance(handle, kind) else None


class _Counts(dict):
    def __init__(self):
        super().__init__((k, 0) for k in CALLBACK_KINDS)


class _Image(_Handle):
    def __init__(self, session, index, name):
        super().__init__()
        self.session = session
        self.index = index
        self.name = name
        self.info = None
        self.types = {}
        self.missing = []
        self.counts = _Counts()

    def note_missing(self, what):
        if what not in self.missing:
            self.missing.append(what)


class _Type(_Handle):
    def __init__(self, image, type_id):
        super().__init__()
        self.image = image
        self.type_id = type_id
        self.fields = {}
        self.size = None


class _Process(_Handle):
    def __init__(self, session, index, image, desc):
        super().__init__()
        self.session = session
        self.index = index
        self.image = image
        self.desc = desc
        self.info = None
        self.counts = _Counts()
        self.fetches = 0
        self.fetched_bytes = 0
        self.unreadable = []
        self.pages = {}

    def read(self, addr, size):
        """`size` bytes at `addr`, page by page through the cache."""
        service = self.session.service
        if addr < 0 or addr + size > 1 << 64:
            raise Unreadable("range wraps around")
        first, last = addr // PAGE, (addr + size - 1) // PAGE
        if first == last and first in self.pages:
            page = self.pages[first]
            at = addr - first * PAGE
            return page[at:at + size]
        chunks = []
        for n in range(first, last + 1):
            page = self.pages.get(n)
            if page is None:
                try:
                    page = service.read(self.index, n * PAGE, PAGE)
                except Unreadable:
                    # A page may be readable in part (a core that lacks
                    # the rest): ask for exactly what is wanted of it.
                    lo = max(addr, n * PAGE)
                    hi = min(addr + size, (n + 1) * PAGE)
                    chunks.append(service.read(self.index, lo, hi - lo))
                    continue
                if len(self.pages) >= CACHE_PAGES:
                    self.pages.clear()
                self.pages[n] = page
            lo = max(addr, n * PAGE) - n * PAGE
            hi = min(addr + size, (n + 1) * PAGE) - n * PAGE
            chunks.append(page[lo:hi])
        return b"".join(chunks)

    def note_unreadable(self, addr, size, why):
        if len(self.unreadable) < UNREADABLE_KEPT:
            self.unreadable.append("%d bytes at %#x: %s" % (size, addr, why))


# ---- The callbacks ---------------------------------------------------------


def _guarded(fallback):
    """Nothing may unwind into the DLL: any exception (even ^C) becomes
    `fallback`; an interrupt is remembered and raised after the DLL returns."""

    def wrap(body):
        def callback(*args):
            try:
                return body(*args)
            except KeyboardInterrupt:
                Session.interrupted = True
                return fallback
            except BaseException as e:  # noqa: BLE001 (the C boundary)
                Session.note_callback_error(body.__name__, e)
                return fallback

        callback.__name__ = body.__name__
        return callback

    return wrap


@_guarded(None)
def dprints(text):
    if text:
        Session.dprints.append(c_string(text).rstrip())


_error_buffers = {}


@_guarded(None)
def errorstring(code):
    # The DLL only reads it; static for the life of the process.
    if code not in _error_buffers:
        text = _ERROR_TEXT.get(code, b"mqs host: unknown error code")
        _error_buffers[code] = ctypes.create_string_buffer(text)
    return ctypes.addressof(_error_buffers[code])


@_guarded(None)
def put_image_info(image, info):
    i = _resolve(image, _Image)
    if i:
        i.counts["info"] += 1
        i.info = info


@_guarded(None)
def get_image_info(image):
    i = _resolve(image, _Image)
    if not i:
        return None
    i.counts["info"] += 1
    return i.info


@_guarded(None)
def put_process_info(process, info):
    p = _resolve(process, _Process)
    if p:
        p.counts["info"] += 1
        p.info = info


@_guarded(None)
def get_process_info(process):
    p = _resolve(process, _Process)
    if not p:
        return None
    p.counts["info"] += 1
    return p.info


@_guarded(None)
def get_type_sizes(process, sizes):
    # In the image table, but it takes the process.
    p = _resolve(process, _Process)
    if not p or not sizes:
        return
    p.counts["get_type_sizes"] += 1
    # Exactly the five ints of mqs_target_type_sizes.
    out = ABI.mqs_target_type_sizes.from_address(sizes)
    (out.short_size, out.int_size, out.long_size, out.long_long_size,
     out.pointer_size) = p.desc["type_sizes"]


def _find(image, name, addr, function):
    i = _resolve(image, _Image)
    if not i:
        return BAD_HANDLE
    i.counts["find_function" if function else "find_symbol"] += 1
    if not name:
        return BAD_ARGUMENT
    text = c_string(name)
    value = i.session.service.find_symbol(i.index, text, function)
    if value is None:
        i.note_missing("%s '%s'" % ("function" if function else "symbol", text))
        return NOT_FOUND
    # A NULL out-pointer only asks whether the name exists.
    if addr:
        ABI.mqs_taddr_t.from_address(addr).value = value
    return OK


@_guarded(INTERNAL)
def find_function(image, name, lang, addr):
    return _find(image, name, addr, True)


@_guarded(INTERNAL)
def find_symbol(image, name, addr):
    return _find(image, name, addr, False)


@_guarded(None)
def find_type(image, name, lang):
    i = _resolve(image, _Image)
    if not i:
        return None
    i.counts["find_type"] += 1
    if not name:
        return None
    text = c_string(name)
    if text not in i.types:
        type_id = i.session.service.find_type(i.index, text)
        i.types[text] = None if type_id is None else _Type(i, type_id)
    handle = i.types[text]
    if handle is None:
        i.note_missing("type '%s'" % text)
        return None
    return handle.address


@_guarded(-1)
def field_offset(type_, field):
    t = _resolve(type_, _Type)
    if not t:
        return -1
    t.image.counts["field_offset"] += 1
    if not field:
        return -1
    name = c_string(field)
    if name not in t.fields:
        t.fields[name] = t.image.session.service.field_offset(t.type_id, name)
    offset = t.fields[name]
    return -1 if offset is None or not 0 <= offset < 1 << 31 else offset


@_guarded(-1)
def sizeof(type_):
    t = _resolve(type_, _Type)
    if not t:
        return -1
    t.image.counts["sizeof"] += 1
    if t.size is None:
        size = t.image.session.service.sizeof(t.type_id)
        t.size = -1 if size is None or not 0 <= size < 1 << 31 else size
    return t.size


@_guarded(-1)
def get_global_rank(process):
    p = _resolve(process, _Process)
    if not p:
        return -1
    p.counts["get_global_rank"] += 1
    return p.desc["global_rank"]


@_guarded(None)
def get_image(process):
    p = _resolve(process, _Process)
    if not p:
        return None
    p.counts["get_image"] += 1
    return p.image.address


@_guarded(INTERNAL)
def fetch_data(process, addr, size, buf):
    p = _resolve(process, _Process)
    if not p:
        return BAD_HANDLE
    p.counts["fetch"] += 1
    if size < 0:
        return BAD_ARGUMENT
    p.fetches += 1
    if size == 0:
        return OK
    if not buf:
        return BAD_ARGUMENT
    try:
        data = p.read(addr, size)
    except Unreadable as e:
        p.note_unreadable(addr, size, str(e))
        return READ_FAILED
    if len(data) != size:
        p.note_unreadable(addr, size, "the debugger gave %d bytes" % len(data))
        return READ_FAILED
    ctypes.memmove(buf, data, size)
    p.fetched_bytes += size
    return OK


@_guarded(None)
def target_to_host(process, source, dest, size):
    p = _resolve(process, _Process)
    if not p:
        return
    p.counts["target_to_host"] += 1
    if not source or not dest or size <= 0:
        return
    data = ctypes.string_at(source, size)
    # A target of the other byte order (a core file from elsewhere).
    if p.desc.get("big_endian", False) != (sys.byteorder == "big"):
        data = data[::-1]
    ctypes.memmove(dest, data, size)


def _table(struct, functions):
    """A callback table of the header's layout (field types from mqs_abi)."""
    values = {}
    for name, ftype in struct._fields_:
        values[name] = ftype(functions[name[len("mqs_"):-len("_fp")]])
    return struct(**values)


_libc = ctypes.CDLL(None)
# The DLL allocates through the debugger: straight to the C library, which
# accepts malloc(0) and free(NULL), with no Python in between.
_C_FUNCTIONS = {
    "malloc": ctypes.cast(_libc.malloc, ctypes.c_void_p).value,
    "free": ctypes.cast(_libc.free, ctypes.c_void_p).value,
}
_FUNCTIONS = dict(_C_FUNCTIONS)
_FUNCTIONS.update({
    f.__name__: f
    for f in (
        dprints, errorstring, put_image_info, get_image_info, put_process_info,
        get_process_info, get_type_sizes, find_function, find_symbol, find_type,
        field_offset, sizeof, get_global_rank, get_image, fetch_data, target_to_host,
    )
})
# Kept for good: a DLL holds these pointers for as long as it is loaded,
# which is until the debugger exits.
BASIC = _table(ABI.mqs_basic_callbacks, _FUNCTIONS)
IMAGE = _table(ABI.mqs_image_callbacks, _FUNCTIONS)
PROCESS = _table(ABI.mqs_process_callbacks, _FUNCTIONS)


# ---- The DLL ---------------------------------------------------------------

_loaded = {}


class Dll:
    """A loaded, checked DLL with the callbacks installed. Loaded once per
    path and never unloaded: the interface promises DLLs that."""

    @staticmethod
    def load(path):
        real = os.path.realpath(path)
        if real not in _loaded:
            _loaded[real] = Dll(real)
        return _loaded[real]

    def __init__(self, path):
        if not os.path.exists(path):
            raise HostError("message-queue DLL %s: no such file" % path)
        try:
            # RTLD_NOW: an unresolved symbol is an error now, not a crash later.
            lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise HostError("message-queue DLL %s: not loadable: %s" % (path, e)) from None
        self.path = path
        self.entry = {}
        missing = []
        for name, need in mqs_abi.ENTRY_POINTS:
            if name not in ABI.ENTRY:
                continue
            try:
                function = getattr(lib, name)
            except AttributeError:
                if need == "required":
                    missing.append(name)
                continue
            function.restype, function.argtypes = ABI.ENTRY[name]
            self.entry[name] = function
        if missing:
            raise HostError(
                "message-queue DLL %s: not loadable: not a message-queue DLL: "
                "missing entry points %s" % (path, ", ".join(missing)))
        self.compatibility = self.entry["mqs_version_compatibility"]()
        if self.compatibility != ABI.MQS_INTERFACE_COMPATIBILITY:
            raise HostError(
                "message-queue DLL %s: incompatible: interface compatibility %d; "
                "this extension speaks %d (MPI-1), which every MPI's DLL implements"
                % (path, self.compatibility, ABI.MQS_INTERFACE_COMPATIBILITY))
        width = self.entry.get("mqs_dll_taddr_width")
        width = width() if width else ctypes.sizeof(ctypes.c_ulong)
        if width != ctypes.sizeof(ABI.mqs_taddr_t):
            raise HostError(
                "message-queue DLL %s: incompatible: its target addresses are %d "
                "bytes wide, this host's are %d"
                % (path, width, ctypes.sizeof(ABI.mqs_taddr_t)))
        self.entry["mqs_setup_basic_callbacks"](ctypes.addressof(BASIC))
        self.version = self.current_version() or "(no version string)"

    def current_version(self):
        # A DLL may name the MPI it detected once it saw an image (ours does).
        return c_string(self.entry["mqs_version_string"]())

    def code_text(self, code):
        text = c_string(self.entry["mqs_dll_error_string"](code))
        return text or None

    def error_string(self, code):
        text = self.code_text(code)
        return "%s (code %d)" % (text, code) if text else "error code %d" % code

    def has_comm_group(self):
        return "mqs_get_comm_group" in self.entry


def format_has_queues_message(fmt, image):
    """Fills the `%s` of a has_queues message once, without printf; `%%` is
    `%`; flattened to one line."""
    out = []
    filled = False
    i = 0
    while i < len(fmt):
        c = fmt[i]
        nxt = fmt[i + 1] if i + 1 < len(fmt) else ""
        if c == "%" and nxt == "s" and not filled:
            out.append(image)
            filled = True
            i += 2
            continue
        if c == "%" and nxt == "%":
            out.append("%")
            i += 2
            continue
        out.append(c)
        i += 1
    return " ".join("".join(out).split())


def dll_info(path, version, compatibility):
    """The model's `dll` object: the MPI and backend our DLL's version names."""
    info = {"path": path, "version": version, "compatibility": compatibility}
    _, found, rest = version.partition("; detected: ")
    if found:
        parts = rest.split("; ")
        mpi = parts[0].strip()
        backend = next((p[len("backend: "):].strip() for p in parts
                        if p.startswith("backend: ")), "")
        if mpi:
            info["mpi"] = mpi
        if backend:
            info["backend"] = backend
    return info


# ---- The session -----------------------------------------------------------


class Session:
    """One dump of several processes through one DLL, in the contract's
    calling sequence."""

    # What the callbacks report outside their return codes (class-level:
    # the tables are static, one session runs at a time).
    dprints = []
    callback_errors = []
    interrupted = False

    @classmethod
    def note_callback_error(cls, name, error):
        if len(cls.callback_errors) < 16:
            cls.callback_errors.append("%s: %s: %s" % (name, type(error).__name__, error))

    def __init__(self, dll, service):
        self.dll = dll
        self.service = service
        self.images = []
        self.processes = []
        Session.dprints = []
        Session.callback_errors = []
        Session.interrupted = False

    def call(self, name, *args):
        self.service.calling(name)
        result = self.dll.entry[name](*args)
        if Session.interrupted:
            Session.interrupted = False
            raise KeyboardInterrupt
        return result

    def close(self):
        """Destroys in the order the interface wants: processes, then images."""
        for p in self.processes:
            if p.info:
                info, p.info = p.info, None
                self.call("mqs_destroy_process_info", info)
            p.drop()
        for i in self.images:
            if i.info:
                info, i.info = i.info, None
                self.call("mqs_destroy_image_info", info)
            for t in i.types.values():
                if t:
                    t.drop()
            i.drop()

    def add(self, index, desc):
        """Hands one process (and its image) to the DLL; raises HostError
        when the DLL cannot show its queues."""
        image = _Image(self, index, desc["executable"])
        self.images.append(image)
        rc = self.call("mqs_setup_image", image.address, ctypes.addressof(IMAGE))
        if rc != OK:
            raise HostError("the DLL failed in mqs_setup_image: %s" % self.dll.error_string(rc))
        message = ctypes.c_void_p()
        rc = self.call("mqs_image_has_queues", image.address, ctypes.byref(message))
        if rc != OK:
            raise HostError(self.no_queues(image, rc, message.value))
        process = _Process(self, index, image, desc)
        self.processes.append(process)
        rc = self.call("mqs_setup_process", process.address, ctypes.addressof(PROCESS))
        if rc != OK:
            raise HostError("the DLL failed in mqs_setup_process: %s"
                            % self.dll.error_string(rc))
        message = ctypes.c_void_p()
        rc = self.call("mqs_process_has_queues", process.address, ctypes.byref(message))
        if rc != OK:
            raise HostError(self.no_queues(image, rc, message.value))
        return process

    def no_queues(self, image, rc, message):
        text = format_has_queues_message(c_string(message), image.name) if message else ""
        detail = text or "the DLL cannot show message queues (%s)" % self.dll.error_string(rc)
        if image.missing:
            detail += " [not found in the MPI's symbols and debug info: %s]" % ", ".join(
                image.missing)
        return detail

    def dump(self, process):
        """Every communicator and queue of a process, as the model's
        ProcessDump (without the fields only the caller knows)."""
        started = time.monotonic()
        communicators = self.walk_communicators(process)
        counts = dict(process.counts)
        for kind, n in process.image.counts.items():
            counts[kind] += n
        desc = process.desc
        dump = {
            "pid": desc["pid"],
            "global_rank": desc["global_rank"],
            "executable": desc["executable"],
            "dll": dll_info(self.dll.path, self.dll.current_version() or self.dll.version,
                            self.dll.compatibility),
            "communicators": communicators,
        }
        if process.unreadable:
            dump["unreadable"] = list(process.unreadable)
        dump["stats"] = {
            "fetches": process.fetches,
            "fetched_bytes": process.fetched_bytes,
            "syscalls": 0,
            "elapsed_ms": (time.monotonic() - started) * 1e3,
            "callbacks": counts,
        }
        return dump

    def section_error(self, call, rc):
        return {"status": "error", "message": "%s: %s" % (call, self.dll.error_string(rc))}

    def no_information(self, what):
        # The interface's only channel for why: the DLL's text for
        # mqs_no_information, when it says more than the generic words.
        text = self.dll.code_text(NO_INFORMATION)
        if text:
            low = text.lower()
            generic = (len(low) < 40 or low.endswith("no information")
                       or low.endswith("nothing is known"))
            if not generic:
                return {"status": "not_available",
                        "reason": "the DLL has no information %s: %s" % (what, text)}
        return {"status": "not_available", "reason": "the DLL has no information %s" % what}

    def walk_communicators(self, process):
        handle = process.address
        rc = self.call("mqs_update_communicator_list", handle)
        if rc != OK:
            return self.section_error("mqs_update_communicator_list", rc)
        rc = self.call("mqs_setup_communicator_iterator", handle)
        if rc == END_OF_LIST:
            return {"status": "ok", "list": []}
        if rc == NO_INFORMATION:
            return self.no_information("about communicators")
        if rc != OK:
            return self.section_error("mqs_setup_communicator_iterator", rc)
        comms = []
        while len(comms) < MAX_COMMUNICATORS:
            out = ABI.mqs_communicator()
            rc = self.call("mqs_get_communicator", handle, ctypes.byref(out))
            if rc != OK:
                if not comms:
                    return self.section_error("mqs_get_communicator", rc)
                break
            comm = {
                "unique_id": out.unique_id,
                "name": _chars(out.name),
                "size": out.size,
                "local_rank": out.local_rank,
                "group": self.comm_group(handle, out.size),
            }
            for op_class, key in OP_CLASSES:
                comm[key] = self.walk_queue(handle, op_class, key)
            comms.append(comm)
            # Never called again after the end: both shipped DLLs then
            # dereference NULL.
            if self.call("mqs_next_communicator", handle) != OK:
                break
        return {"status": "ok", "list": comms}

    def comm_group(self, handle, size):
        if not self.dll.has_comm_group() or not 1 <= size <= MAX_GROUP:
            return None
        ranks = (ctypes.c_int * size)(*([-1] * size))
        if self.call("mqs_get_comm_group", handle, ranks) != OK:
            return None
        return list(ranks)

    def walk_queue(self, handle, op_class, key):
        rc = self.call("mqs_setup_operation_iterator", handle, op_class)
        if rc == END_OF_LIST:
            return {"status": "ok", "operations": [], "truncated": None}
        if rc == NO_INFORMATION:
            return self.no_information("about %s" % key)
        if rc != OK:
            return self.section_error("mqs_setup_operation_iterator", rc)
        operations = []
        truncated = None
        while True:
            if len(operations) >= MAX_OPERATIONS:
                truncated = "stopped after %d operations" % MAX_OPERATIONS
                break
            out = ABI.mqs_pending_operation()
            rc = self.call("mqs_next_operation", handle, ctypes.byref(out))
            if rc == OK:
                operations.append(operation(out))
            elif rc == END_OF_LIST:
                break
            else:
                truncated = "mqs_next_operation failed: %s" % self.dll.error_string(rc)
                break
        return {"status": "ok", "operations": operations, "truncated": truncated}


def status_name(status):
    return {0: "pending", 1: "matched", 2: "complete"}.get(status, "status %d" % status)


def operation(raw):
    """One operation exactly as the DLL wrote it (the model's Operation)."""
    lines = []
    for line in raw.extra_text:
        text = bytes(line).split(b"\0", 1)[0]
        if not text:
            break
        lines.append(text.decode("utf-8", "replace"))
    return {
        "status": status_name(raw.status),
        "desired_local_rank": raw.desired_local_rank,
        "desired_global_rank": raw.desired_global_rank,
        "desired_tag": None if raw.tag_wild else raw.desired_tag,
        "desired_length": raw.desired_length,
        "system_buffer": raw.system_buffer != 0,
        "buffer": raw.buffer,
        "actual_local_rank": raw.actual_local_rank,
        "actual_global_rank": raw.actual_global_rank,
        "actual_tag": raw.actual_tag,
        "actual_length": raw.actual_length,
        "extra_text": lines,
    }


def dump(dll_path, descriptions, service):
    """Dumps every described process with the DLL at `dll_path`.

    Returns {"dll": {...}, "processes": [{"ok": dump} or {"error": text}],
    "dprints": [...], "callback_errors": [...]}; raises HostError when the
    DLL cannot be used at all.
    """
    dll = Dll.load(dll_path)
    session = Session(dll, service)
    results = []
    try:
        for index, desc in enumerate(descriptions):
            try:
                process = session.add(index, desc)
            except HostError as e:
                results.append({"error": str(e)})
                continue
            results.append({"ok": session.dump(process)})
    finally:
        session.close()
    return {
        "dll": {"path": dll.path, "version": dll.current_version() or dll.version,
                "compatibility": dll.compatibility},
        "processes": results,
        "dprints": list(Session.dprints),
        "callback_errors": list(Session.callback_errors),
    }
