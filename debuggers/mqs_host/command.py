"""`mpi queues`, whatever the debugger: its options, and the command's
steps, each carried out by mqs's host library (host.py): which DLL reads
each process and its rank, one dump per DLL (in a helper process unless
--in-process), the listing.

A debugger extension gives it a list of `Target`s (its processes: live, or
core files it has loaded) and prints what `run` returns; every failure is a
`CommandError`, which the extension reports as the debugger's own error.
"""

import os

from . import host, isolate

USAGE = """\
mpi queues [all] [--dll PATH|ours|mpi] [--json] [--in-process] [--trust-dll] [--timeout SECS]

Lists the message queues of the current process (with `all`: of every
process the debugger holds, live or core files): communicators, pending
sends, posted receives and unexpected messages, as mqs-dump prints them.

  --dll mpi        the DLL the MPI names in MPIR_dll_name (the default)
  --dll ours       mqs's own DLL: $MQS_DLL, else libmqs_dll.so beside the
                   mqs-dump on PATH, else this checkout's target/ build
  --dll PATH       that DLL
  --json           mqs-dump's JSON (docs/json.md) instead of text
  --in-process     load the DLL into the debugger itself (faster; a DLL that
                   crashes then takes the debugger with it); by default it
                   runs in a helper process whose death is only an error
  --trust-dll      load a DLL the process names even if someone other than
                   root or you could have written it
  --timeout SECS   how long the DLL may stay silent before it is taken for
                   hung and ended (default 60; helper only)"""

OURS = "libmqs_dll.so"
# mqs-dump's exit code (host/mqs-core/src/error.rs) for failures of no
# other kind, in the failures' JSON.
EXIT_OTHER = 1


class CommandError(Exception):
    """What the debugger reports as its error: one message."""


class Target:
    """One process as the debugger holds it. Extensions implement it."""

    pid = 0
    executable = ""
    # A live process of this machine (its /proc is its own).
    local_live = False

    def read(self, addr, size):
        """`size` bytes at `addr`, or raise host.Unreadable."""
        raise NotImplementedError

    def find_symbol(self, name, function):
        """The address of a data symbol or function of its executable or any
        shared object it loaded (file-static ones included), or None."""
        raise NotImplementedError

    def find_type(self, name):
        """The debugger's type for a typedef name, struct tag or `struct TAG`,
        or None."""
        raise NotImplementedError

    def field_offset(self, type_, name):
        """The byte offset of a top-level field (members of anonymous
        struct and union members count as top-level), or of a member of an
        untagged struct or union member by path (`recv.tag.sn`), or None.
        Extensions answer it with `path_offset`."""
        raise NotImplementedError

    def sizeof(self, type_):
        raise NotImplementedError

    def pointer_size(self):
        """sizeof a pointer (and of long) in the target."""
        raise NotImplementedError


def path_offset(type_, path, field, untagged):
    """A member's offset by path, as mqs-core answers `field_offset`: each
    step a member (`field(type, name, base)` gives its offset and type),
    every step but the last into a struct or union no type name reaches
    (`untagged(type)`), which a DLL cannot ask by name (UCX's
    `ucp_request_t.recv.tag.sn`). A C member's name has no dot, so a
    plain name is one step."""
    offset, current = 0, type_
    steps = path.split(".")
    for i, name in enumerate(steps):
        found = field(current, name, offset)
        if found is None:
            return None
        offset, current = found
        if i + 1 < len(steps) and not untagged(current):
            return None
    return offset


class Options:
    def __init__(self):
        self.all = False
        self.dll = None
        self.json = False
        self.in_process = False
        self.trust_dll = False
        self.timeout = isolate.DEFAULT_SILENCE


def parse(argv):
    o = Options()
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "all":
            o.all = True
        elif a in ("--dll", "--timeout"):
            if not args:
                raise CommandError("%s needs a value\n%s" % (a, USAGE))
            value = args.pop(0)
            if a == "--dll":
                o.dll = value
            else:
                try:
                    o.timeout = float(value)
                except ValueError:
                    raise CommandError("--timeout takes seconds, not %r" % value) from None
                if not o.timeout > 0:
                    raise CommandError("--timeout takes a positive number of seconds")
        elif a.startswith("--dll="):
            o.dll = a[len("--dll="):]
        elif a == "--json":
            o.json = True
        elif a == "--in-process":
            o.in_process = True
        elif a == "--trust-dll":
            o.trust_dll = True
        elif a in ("-h", "--help", "help"):
            raise CommandError(USAGE)
        else:
            raise CommandError("unknown argument %r\n%s" % (a, USAGE))
    return o


class Answers(host.Service):
    """The host's questions, answered by the debugger's targets; types get
    ids the helper can carry."""

    def __init__(self, targets):
        self.targets = targets
        self.types = []

    def read(self, process, addr, size):
        return self.targets[process].read(addr, size)

    def find_symbol(self, image, name, function):
        return self.targets[image].find_symbol(name, function)

    def find_type(self, image, name):
        t = self.targets[image].find_type(name)
        if t is None:
            return None
        self.types.append((self.targets[image], t))
        return len(self.types) - 1

    def field_offset(self, type_id, name):
        target, t = self.types[type_id]
        return target.field_offset(t, name)

    def sizeof(self, type_id):
        target, t = self.types[type_id]
        return target.sizeof(t)


def _built(name, variable, what):
    """One of mqs's built files: $VARIABLE, else beside the mqs-dump on
    PATH (scripts/install puts them there), else this checkout's newest
    build."""
    explicit = os.environ.get(variable)
    if explicit:
        return explicit
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory and os.access(os.path.join(directory, "mqs-dump"), os.X_OK):
            beside = os.path.join(os.path.realpath(directory), name)
            if os.path.exists(beside):
                return beside
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    built = [os.path.join(checkout, "target", p, name) for p in ("release", "debug")]
    built = [p for p in built if os.path.exists(p)]
    if built:
        return max(built, key=os.path.getmtime)
    raise CommandError("%s (%s) is not found: set %s to its path, or build it "
                       "(cargo build -p %s)" % (what, name, variable, name[3:-3].replace("_", "-")))


def our_dll():
    """mqs's own DLL."""
    return _built(OURS, "MQS_DLL", "mqs's own DLL")


def host_library():
    """mqs's host, as the library the debuggers load."""
    return _built(host.LIBRARY, "MQS_DEBUGGER_LIB", "mqs's debugger library")


def describe(target):
    return {
        "pid": target.pid,
        "executable": target.executable,
        "pointer_size": target.pointer_size(),
        "local_live": bool(target.local_live),
    }


def chosen_dll(options):
    """The DLL the user gave (None: the one each process names)."""
    if options.dll in (None, "mpi"):
        return None
    if options.dll == "ours":
        return our_dll()
    return options.dll


def run(targets, options):
    """Dumps the targets; returns (text to print, an error for the
    debugger or None). Raises CommandError when nothing could be dumped."""
    if not targets:
        raise CommandError("no process: run or attach to one, or load a core file")
    library = host_library()
    descriptions = [describe(t) for t in targets]
    try:
        # No DLL runs here: the debugger answers in its own process.
        plans = host.plan(library, chosen_dll(options), options.trust_dll,
                          options.dll is None, descriptions, Answers(targets))
    except host.HostError as e:
        raise CommandError(str(e)) from None
    groups = {}
    failures = []
    for index, plan in enumerate(plans):
        descriptions[index]["global_rank"] = plan["global_rank"]
        descriptions[index]["chosen"] = plan.get("chosen")
        if "error" in plan:
            failures.append((index, plan["error"], plan["exit_code"]))
            continue
        groups.setdefault(os.path.realpath(plan["dll"]), []).append(index)
    dumps = []
    outputs = []
    for path, members in groups.items():
        answers = Answers([targets[i] for i in members])
        job = [descriptions[i] for i in members]
        try:
            if options.in_process:
                result = host.dump(library, path, job, answers)
            else:
                result = isolate.run_isolated(library, path, job, answers, options.timeout)
        except (host.HostError, isolate.DllFailure) as e:
            failures.extend((i, str(e), EXIT_OTHER) for i in members)
            continue
        output = result.get("dll_output", [])
        made = iter(result["dumps"])
        for index, outcome in zip(members, result["processes"]):
            if "error" in outcome:
                failures.append((index, outcome["error"], outcome["exit_code"]))
                continue
            if output:
                outputs.append([len(dumps), output])
                output = []
            dumps.append(next(made))
        for error in result.get("callback_errors", []):
            failures.append((members[0], "a callback failed: %s" % error, EXIT_OTHER))
    if not dumps and len(failures) == 1:
        raise CommandError(failures[0][1])
    failed = []
    for index, message, code in failures:
        rank = descriptions[index]["global_rank"]
        # As mqs-dump numbers a rank it cannot tell: by its place in the job.
        failed.append({"rank": rank if rank >= 0 else index, "pid": targets[index].pid,
                       "host": "", "message": message, "exit_code": code})
    try:
        text = host.render(library, dumps, failed if options.json else [], outputs,
                           options.json)
    except host.HostError as e:
        raise CommandError(str(e)) from None
    error = None
    if failed:
        error = "; ".join("pid %d: %s" % (f["pid"], f["message"]) for f in failed)
    return text, error
