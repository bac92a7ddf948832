"""mqs for lldb: `mpi queues`, the message queues of the MPI processes lldb
holds, through any message-queue DLL (the one the MPI names, mqs's own, or
a path), with lldb itself answering the DLL's callbacks.

Load it with `command script import /path/to/mqs/debuggers/lldb/mqs.py`
(in ~/.lldbinit to have it always); `mpi queues --help` tells the options.
docs/debuggers.md says more.
"""

import os
import shlex
import sys

import lldb

if not hasattr(lldb, "eSymbolTypeData"):
    # An lldb module without lldb's API: Debian's lldb found a stub where its
    # real module should be. Say in one line what to set, not a traceback.
    raise ImportError(
        "mqs: this lldb's Python module is incomplete (%s): start lldb through "
        "debuggers/lldb/mqs-lldb, or with PYTHONPATH set to what "
        "`debuggers/lldb/mqs-lldb --python-path` prints" % getattr(lldb, "__file__", "?"))

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mqs_host import command, host  # noqa: E402 (after the path is set)
from mqs_host.command import path_offset as _path_offset  # noqa: E402

_DATA_SYMBOLS = (lldb.eSymbolTypeData, lldb.eSymbolTypeRuntime, lldb.eSymbolTypeAbsolute)
_STRUCT_CLASSES = (lldb.eTypeClassStruct, lldb.eTypeClassClass)


class LldbTarget(command.Target):
    """One target of lldb with its process: live, or a core file."""

    def __init__(self, target):
        self.target = target
        self.process = target.GetProcess()
        self.pid = self.process.GetProcessID()
        self.executable = target.GetExecutable().fullpath or ""
        self.local_live = (self.process.GetPluginName() != "elf-core"
                           and target.GetPlatform().GetName() == "host")

    def read(self, addr, size):
        error = lldb.SBError()
        data = self.process.ReadMemory(addr, size, error)
        if error.Fail() or data is None:
            raise host.Unreadable(error.GetCString() or "cannot read memory at %#x" % addr)
        return bytes(data)

    def _modules(self):
        # The executable first, as the Rust host orders objects.
        return [self.target.GetModuleAtIndex(i) for i in range(self.target.GetNumModules())]

    def find_symbol(self, name, function):
        # ELF symbols first, global before local, in object order: the
        # executable's copy of a copy-relocated variable is the live one.
        wanted = (lldb.eSymbolTypeCode,) if function else _DATA_SYMBOLS
        for external in (True, False):
            for module in self._modules():
                for context in module.FindSymbols(name):
                    symbol = context.GetSymbol()
                    if (not symbol.IsValid() or symbol.GetType() not in wanted
                            or symbol.IsExternal() != external):
                        continue
                    address = symbol.GetStartAddress().GetLoadAddress(self.target)
                    if address != lldb.LLDB_INVALID_ADDRESS:
                        return address
        if function:
            for context in self.target.FindFunctions(name):
                address = context.GetFunction().GetStartAddress().GetLoadAddress(self.target)
                if address != lldb.LLDB_INVALID_ADDRESS:
                    return address
            return None
        values = self.target.FindGlobalVariables(name, 1)
        if values.GetSize():
            address = values.GetValueAtIndex(0).GetLoadAddress()
            if address != lldb.LLDB_INVALID_ADDRESS:
                return address
        return None

    def find_type(self, name):
        tag = None
        for prefix in ("struct ", "union ", "enum "):
            if name.startswith(prefix):
                tag, name = prefix.strip(), name[len(prefix):]
        found = []
        types = self.target.FindTypes(name)
        for i in range(types.GetSize()):
            t = types.GetTypeAtIndex(i)
            if not t.IsValid():
                continue
            if tag == "struct" and t.GetTypeClass() not in _STRUCT_CLASSES:
                continue
            if tag == "union" and t.GetTypeClass() != lldb.eTypeClassUnion:
                continue
            if tag == "enum" and t.GetTypeClass() != lldb.eTypeClassEnumeration:
                continue
            found.append(t)
        # A declaration only (an opaque struct) is completed elsewhere.
        complete = [t for t in found if t.GetCanonicalType().IsTypeComplete()]
        return (complete or found or [None])[0]

    def field_offset(self, type_, name):
        return _path_offset(type_, name, _field, _untagged)

    def sizeof(self, type_):
        return type_.GetCanonicalType().GetByteSize()

    def pointer_size(self):
        return self.target.GetAddressByteSize()


def _field(type_, name, base):
    """The member `name` of a struct or union: (offset, its type)."""
    t = type_.GetCanonicalType()
    fields = [t.GetFieldAtIndex(i) for i in range(t.GetNumberOfFields())]
    for f in fields:
        if f.GetName() == name:
            return base + f.GetOffsetInBytes(), f.GetType()
    # Members of an anonymous struct or union are members of this one.
    for f in fields:
        if not f.GetName():
            found = _field(f.GetType(), name, base + f.GetOffsetInBytes())
            if found is not None:
                return found
    return None


def _untagged(type_):
    """A struct or union no type name reaches (`struct { .. } recv;`):
    lldb names it `(unnamed struct)`."""
    name = type_.GetName() or ""
    return (type_.GetTypeClass() in _STRUCT_CLASSES + (lldb.eTypeClassUnion,)
            and (not name or name.startswith("(")))


def _targets(debugger, everyone):
    if everyone:
        targets = [debugger.GetTargetAtIndex(i) for i in range(debugger.GetNumTargets())]
    else:
        targets = [debugger.GetSelectedTarget()]
    return [LldbTarget(t) for t in targets
            if t.IsValid() and t.GetProcess().IsValid() and t.GetProcess().GetProcessID()]


def mpi_command(debugger, line, context, result, internal_dict):
    """mpi queues [all] [--dll PATH|ours|mpi] [--json] [--in-process] ...: the
    message queues of MPI processes (`mpi queues --help`)."""
    try:
        argv = shlex.split(line)
        if not argv or argv[0] != "queues":
            raise command.CommandError(command.USAGE)
        options = command.parse(argv[1:])
        text, error = command.run(_targets(debugger, options.all), options)
    except command.CommandError as e:
        result.SetError(str(e))
        return
    except Exception as e:  # noqa: BLE001 (the debugger must live on)
        result.SetError("mpi queues: internal error: %s: %s" % (type(e).__name__, e))
        return
    result.AppendMessage(text.rstrip("\n"))
    if error:
        result.SetError(error)


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand("command script add -f %s.mpi_command mpi" % __name__)
