"""mqs for gdb: `mpi queues`, the message queues of the MPI processes gdb
holds, through any message-queue DLL (the one the MPI names, mqs's own, or
a path), with gdb itself answering the DLL's callbacks.

Load it with `source /path/to/mqs/debuggers/gdb/mqs.py` (in ~/.gdbinit to
have it always); `help mpi queues` tells the options. docs/debuggers.md
says more.
"""

import os
import re
import sys

import gdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mqs_host import command, host  # noqa: E402 (after the path is set)
from mqs_host.command import path_offset as _path_offset  # noqa: E402

# What a DLL may ask gdb for: C names, and type names of a few words.
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.:]*\Z")
_TYPE_NAME = re.compile(r"(struct |union |enum )?[A-Za-z_$][A-Za-z0-9_$:]*( [A-Za-z_]+)*\Z")


def _select(inferior):
    """Symbol and type lookups answer for the selected inferior: select one
    of its threads, without a word (the `inferior` command would print)."""
    if gdb.selected_inferior().num != inferior.num:
        threads = inferior.threads()
        if threads:
            threads[0].switch()


class _Selection:
    """The user's thread and frame, put back after the command."""

    def __init__(self):
        self.thread = gdb.selected_thread()
        try:
            self.frame = gdb.selected_frame()
        except gdb.error:
            self.frame = None

    def restore(self):
        try:
            if self.thread is not None and self.thread.is_valid():
                self.thread.switch()
            if self.frame is not None and self.frame.is_valid():
                self.frame.select()
        except gdb.error:
            pass


class GdbTarget(command.Target):
    """One inferior of gdb: a live process or a core file."""

    def __init__(self, inferior):
        self.inferior = inferior
        self.pid = inferior.pid
        self.executable = inferior.progspace.filename or ""
        connection = getattr(inferior, "connection", None)
        self.local_live = connection is not None and connection.type == "native"
        self._pointer_size = None

    def read(self, addr, size):
        # gdb reads through the selected inferior's thread (its process
        # stratum), whichever inferior it is asked for.
        _select(self.inferior)
        try:
            return bytes(self.inferior.read_memory(addr, size))
        except gdb.MemoryError as e:
            raise host.Unreadable(str(e)) from None
        except (gdb.error, OverflowError, ValueError) as e:
            raise host.Unreadable(str(e)) from None

    def find_symbol(self, name, function):
        if not _NAME.match(name):
            return None
        _select(self.inferior)
        for lookup in (gdb.lookup_global_symbol, gdb.lookup_static_symbol):
            try:
                symbol = lookup(name)
                if symbol is None or symbol.is_function != function:
                    continue
                if not function and not symbol.is_variable:
                    continue
                address = symbol.value().address
                if address is not None:
                    return int(address)
            except gdb.error:
                continue
        # Symbols without debug information (minimal symbols) only.
        try:
            value = gdb.parse_and_eval("(unsigned long)&'%s'" % name)
            return int(value)
        except gdb.error:
            return None

    def find_type(self, name):
        if not _TYPE_NAME.match(name):
            return None
        _select(self.inferior)
        names = [name]
        if not name.startswith(("struct ", "union ", "enum ")):
            # A bare struct tag, as the contract has find_type resolve.
            names += ["struct " + name, "union " + name]
        for n in names:
            try:
                return gdb.lookup_type(n)
            except gdb.error:
                continue
        return None

    def field_offset(self, type_, name):
        return _path_offset(type_, name, _field, _untagged)

    def sizeof(self, type_):
        return type_.strip_typedefs().sizeof

    def pointer_size(self):
        if self._pointer_size is None:
            _select(self.inferior)
            self._pointer_size = gdb.lookup_type("void").pointer().sizeof
        return self._pointer_size


def _field(type_, name, base):
    """The member `name` of a struct or union: (offset, its type)."""
    t = type_.strip_typedefs()
    if t.code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        return None
    fields = t.fields()
    for f in fields:
        if f.name == name and hasattr(f, "bitpos"):
            return base + f.bitpos // 8, f.type
    # Members of an anonymous struct or union are members of this one.
    for f in fields:
        if not f.name and not f.is_base_class and hasattr(f, "bitpos"):
            found = _field(f.type, name, base + f.bitpos // 8)
            if found is not None:
                return found
    return None


def _untagged(type_):
    """A struct or union no type name reaches (`struct { .. } recv;`)."""
    return (type_.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION)
            and type_.tag is None and type_.name is None)


class MpiPrefix(gdb.Command):
    """MPI commands of mqs: `mpi queues` lists the message queues."""

    def __init__(self):
        super().__init__("mpi", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)


class MpiQueues(gdb.Command):
    __doc__ = command.USAGE

    def __init__(self):
        super().__init__("mpi queues", gdb.COMMAND_DATA, gdb.COMPLETE_FILENAME)

    def invoke(self, argument, from_tty):
        selected = gdb.selected_inferior()
        selection = _Selection()
        try:
            options = command.parse(gdb.string_to_argv(argument))
            inferiors = gdb.inferiors() if options.all else [selected]
            targets = [GdbTarget(i) for i in inferiors if i.pid > 0]
            text, error = command.run(targets, options)
        except command.CommandError as e:
            raise gdb.GdbError(str(e)) from None
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 (the debugger must live on)
            raise gdb.GdbError("mpi queues: internal error: %s: %s"
                               % (type(e).__name__, e)) from None
        finally:
            selection.restore()
        gdb.write(text)
        if error:
            raise gdb.GdbError(error)


MpiPrefix()
MpiQueues()
