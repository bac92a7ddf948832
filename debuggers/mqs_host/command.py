"""`mpi queues`, whatever the debugger: its options, which DLL reads each
process, the processes' ranks, one dump per DLL, the listing.

A debugger extension gives it a list of `Target`s (its processes: live, or
core files it has loaded) and prints what `run` returns; every failure is a
`CommandError`, which the extension reports as the debugger's own error.
"""

import os
import stat

from . import host, isolate, render

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

# Environment variables that hold a process's MPI_COMM_WORLD rank
# (host/mqs-acquire/src/members.rs: Open MPI, MPICH's hydra, PMIx launchers).
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
OURS = "libmqs_dll.so"
# mqs-dump's exit codes (host/mqs-core/src/error.rs) for the failures' JSON.
EXIT_NO_DEBUG_INFO = 6
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

    def type_sizes(self):
        """sizeof short, int, long, long long and a pointer in the target."""
        raise NotImplementedError

    def big_endian(self):
        return False


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


def read_c_string(target, addr, limit=4096):
    out = b""
    while len(out) < limit:
        # Up to the end of the page: the string may end just before a hole.
        n = min(host.PAGE - addr % host.PAGE, limit - len(out))
        chunk = target.read(addr, n)
        end = chunk.find(b"\0")
        if end >= 0:
            return (out + chunk[:end]).decode("utf-8", "replace")
        out += chunk
        addr += n
    return out.decode("utf-8", "replace")


def environment(target):
    """The process's environment: /proc's record of it for a live process
    here (what mqs-dump reads), else the C library's `environ` (a core
    file, a remote process)."""
    if target.local_live:
        try:
            with open("/proc/%d/environ" % target.pid, "rb") as f:
                raw = f.read()
            return dict(e.decode("utf-8", "replace").partition("=")[::2]
                        for e in raw.split(b"\0") if b"=" in e)
        except OSError:
            pass
    env = {}
    try:
        where = target.find_symbol("environ", False) or target.find_symbol("__environ", False)
        if not where:
            return env
        word = target.type_sizes()[4]
        array = int.from_bytes(target.read(where, word), "little")
        for i in range(65536):
            entry = int.from_bytes(target.read(array + i * word, word), "little")
            if not entry:
                break
            key, _, value = read_c_string(target, entry).partition("=")
            env.setdefault(key, value)
    except host.Unreadable:
        pass
    return env


def global_rank(target):
    env = environment(target)
    for var in RANK_VARS:
        try:
            return int(env[var])
        except (KeyError, ValueError):
            continue
    return -1


def named_dll(target):
    """The DLL the process names in MPIR_dll_name."""
    where = target.find_symbol("MPIR_dll_name", False)
    if where is None:
        raise CommandError(
            "pid %d names no message-queue DLL (no MPIR_dll_name): not an MPI process, "
            "or give one with --dll" % target.pid)
    try:
        name = read_c_string(target, where)
    except host.Unreadable as e:
        raise CommandError("pid %d: MPIR_dll_name cannot be read: %s" % (target.pid, e)) from None
    if not name:
        raise CommandError("pid %d: MPIR_dll_name is empty; give a DLL with --dll" % target.pid)
    return name


def check_trusted(path):
    """Refuses a DLL that someone other than root or us could have written
    (host/mqs-acquire/src/locate.rs): the target chose it, and it runs our code."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise CommandError("message-queue DLL %s: %s" % (path, e.strerror)) from None
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file"
    elif st.st_uid not in (0, os.geteuid()):
        why = "owned by uid %d, neither root nor you (uid %d)" % (st.st_uid, os.geteuid())
    elif st.st_mode & 0o022:
        why = "writable by %s (mode %o)" % (
            "everyone" if st.st_mode & 0o002 else "its group", st.st_mode & 0o7777)
    if why:
        raise CommandError("message-queue DLL %s: not trusted: %s; pass --trust-dll to load "
                           "it anyway" % (path, why))


def our_dll():
    """mqs's own DLL: $MQS_DLL, beside the mqs-dump on PATH, or this
    checkout's build."""
    explicit = os.environ.get("MQS_DLL")
    if explicit:
        return explicit
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory and os.access(os.path.join(directory, "mqs-dump"), os.X_OK):
            beside = os.path.join(os.path.realpath(directory), OURS)
            if os.path.exists(beside):
                return beside
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    built = [os.path.join(checkout, "target", p, OURS) for p in ("release", "debug")]
    built = [p for p in built if os.path.exists(p)]
    if built:
        return max(built, key=os.path.getmtime)
    raise CommandError("mqs's own DLL (%s) is not found: set MQS_DLL to its path, or build it "
                       "(cargo build -p mqs-dll)" % OURS)


def choose_dll(target, options):
    """(path, how it was chosen or None when --dll named it)."""
    if options.dll in (None, "mpi"):
        path = named_dll(target)
        if not options.trust_dll:
            check_trusted(path)
        return path, (None if options.dll else "the one the MPI names (MPIR_dll_name)")
    if options.dll == "ours":
        return our_dll(), None
    return options.dll, None


def describe(target):
    return {
        "pid": target.pid,
        "executable": target.executable,
        "global_rank": global_rank(target),
        "type_sizes": list(target.type_sizes()),
        "big_endian": bool(target.big_endian()),
    }


def run(targets, options):
    """Dumps the targets; returns (text to print, an error for the
    debugger or None). Raises CommandError when nothing could be dumped."""
    if not targets:
        raise CommandError("no process: run or attach to one, or load a core file")
    groups = {}
    failures = []
    for target in targets:
        try:
            path, chosen = choose_dll(target, options)
            groups.setdefault(os.path.realpath(path), []).append((target, chosen))
        except CommandError as e:
            failures.append((target, str(e), EXIT_OTHER))
    dumps = []
    for path, members in groups.items():
        group = [t for t, _ in members]
        descriptions = [describe(t) for t in group]
        answers = Answers(group)
        try:
            if options.in_process:
                result = host.dump(path, descriptions, answers)
            else:
                result = isolate.run_isolated(path, descriptions, answers, options.timeout)
        except (host.HostError, isolate.DllFailure) as e:
            failures.extend((t, str(e), EXIT_OTHER) for t in group)
            continue
        output = result.get("dll_output", [])
        for (target, chosen), outcome in zip(members, result["processes"]):
            if "error" in outcome:
                failures.append((target, outcome["error"], EXIT_NO_DEBUG_INFO))
                continue
            dump = outcome["ok"]
            if chosen:
                dump["dll"]["chosen"] = chosen
            if output:
                dump["dll_output"], output = output, []
            number_by_world_rank(dump)
            dumps.append(dump)
        for error in result.get("callback_errors", []):
            failures.append((group[0], "a callback failed: %s" % error, EXIT_OTHER))
    dumps.sort(key=lambda d: (d["global_rank"] < 0, d["global_rank"]))
    failed = [{"rank": -1, "pid": t.pid, "host": "", "message": m, "exit_code": c}
              for t, m, c in failures]
    if not dumps and len(failed) == 1:
        raise CommandError(failed[0]["message"])
    if options.json:
        text = render.job_json(dumps, failed) + "\n"
    else:
        text = render.job_text(dumps, [])
    error = None
    if failed:
        error = "; ".join("pid %d: %s" % (f["pid"], f["message"]) for f in failed)
    return text, error


def number_by_world_rank(dump):
    """A rank the environment does not tell is MPI_COMM_WORLD's local rank."""
    if dump["global_rank"] >= 0 or dump["communicators"]["status"] != "ok":
        return
    for comm in dump["communicators"]["list"]:
        if comm["name"] == "MPI_COMM_WORLD":
            dump["global_rank"] = comm["local_rank"]
            return

