"""The dump model as mqs-dump prints it: each process's listing as
host/mqs-analysis/src/render.rs writes it (line for line, so that tests compare the
two), and the JSON of docs/json.md."""

import json

SCHEMA_VERSION = 1

QUEUES = (
    ("sends", "Pending sends"),
    ("receives", "Posted receives"),
    ("unexpected", "Unexpected messages"),
)


def job_json(processes, failures):
    """mqs-dump's --json document for these processes and failures."""
    return json.dumps({
        "schema_version": SCHEMA_VERSION,
        "launcher": None,
        "processes": processes,
        "failures": failures,
    }, indent=2)


def job_text(processes, failures):
    out = []
    for p in processes:
        process_text(out, p)
    for f in failures:
        out.append("Rank %d (pid %d on %s): not dumped: %s"
                   % (f["rank"], f["pid"], f["host"], f["message"]))
    return "\n".join(out) + ("\n" if out else "")


def process_text(out, p):
    rank = "rank %d" % p["global_rank"] if p["global_rank"] >= 0 else "rank unknown"
    out.append("Process %d (%s): %s" % (p["pid"], rank, p["executable"]))
    dll = p["dll"]
    out.append("  DLL %s [%s, interface %d]" % (dll["path"], dll["version"], dll["compatibility"]))
    if dll.get("chosen"):
        out.append("  DLL chosen: %s" % dll["chosen"])
    if dll.get("mpi"):
        out.append("  MPI: %s (the DLL's %s backend)" % (dll["mpi"], dll.get("backend") or "?"))
    for line in p.get("dll_output", []):
        out.append("  DLL output: %s" % line)
    comms = p["communicators"]
    if comms["status"] == "ok" and not comms["list"]:
        out.append("  no communicators")
    elif comms["status"] == "ok":
        for c in comms["list"]:
            communicator_text(out, c)
    elif comms["status"] == "not_available":
        out.append("  communicators not available: %s" % comms["reason"])
    else:
        out.append("  communicators could not be read: %s" % comms["message"])
    if p.get("unreadable"):
        out.append("  Memory the DLL could not read:")
        for what in p["unreadable"]:
            out.append("    %s" % what)
    out.append("")


def communicator_text(out, c):
    out.append("  Communicator %s: size %d, local rank %d, id %#x"
               % (c["name"] or "(unnamed)", c["size"], c["local_rank"], c["unique_id"]))
    if c.get("group") is not None:
        out.append("    global ranks: %s" % " ".join(str(r) for r in c["group"]))
    for key, title in QUEUES:
        queue_text(out, title, key, c[key])


def queue_text(out, title, key, queue):
    if queue["status"] == "ok":
        ops = queue["operations"]
        if not ops and not queue.get("truncated"):
            out.append("    %s: none" % title)
            return
        out.append("    %s: %d" % (title, len(ops)))
        for i, op in enumerate(ops):
            operation_text(out, key, i, op)
        if queue.get("truncated"):
            out.append("      (list incomplete: %s)" % queue["truncated"])
    elif queue["status"] == "not_available":
        out.append("    %s: not available (%s)" % (title, queue["reason"]))
    else:
        out.append("    %s: error: %s" % (title, queue["message"]))


def rank_text(local, glob):
    if local < 0:
        return "ANY"
    if glob < 0:
        return "%d" % local
    return "%d (global %d)" % (local, glob)


def operation_text(out, key, index, op):
    direction = "to" if key == "sends" else "from"
    tag = "ANY" if op["desired_tag"] is None else "%d" % op["desired_tag"]
    out.append("      [%d] %s %s %s tag %s length %d buffer %#x%s" % (
        index, op["status"], direction,
        rank_text(op["desired_local_rank"], op["desired_global_rank"]),
        tag, op["desired_length"], op["buffer"],
        " (system buffer)" if op["system_buffer"] else ""))
    if op["status"] != "pending":
        out.append("          matched %s tag %d length %d" % (
            rank_text(op["actual_local_rank"], op["actual_global_rank"]),
            op["actual_tag"], op["actual_length"]))
    for line in op["extra_text"]:
        out.append("          %s" % line)
