#!/usr/bin/env python3
"""Which case order of yaksa's generated `switch (op)` statements compiles to a
stock libmpich's bytes (see scripts/typepack-debian12-mpich: the order follows
the Python set iteration of the buildd's autogen.sh run, so a rebuild must be
told it).

Works on the rebuild's work directory after stage 5 (the stock library, the
rebuilt one and its debug file, the build log for the compiler's command line,
the source tree). The stock and the rebuilt library have the same .eh_frame
entries in the same order, so the rebuild's symbols name the stock's functions
and give each its place and size there. Each pup function is compiled in the
order asked for and compared with the stock bytes at its place, relocations
masked.

  check  ORDER GLOB          every function of the pup files of the types GLOB
                             names (e.g. '*_int*_t'): how many compile to the
                             stock bytes, and the first few that do not
  search ORDER FUNCTION...   from ORDER, moves one case at a time (the first
                             and the last stay) while the functions' summed
                             distance from the stock code (lines of their
                             disassembly that differ) falls; prints each step.
                             Distance 0 on a few functions is a lead, not the
                             answer: `check` the order on every file.

How the integers' order was found (2026-11-27): `check` with SUM first and the
others in turn on contig_int32_t (its code depends on the first case only);
random orders under the relations that separated matches from the rest (PROD
last, BXOR before LXOR, MAX before MIN); `search` from the best of those on
the blklen 1 and 2 functions that still differed; `check` on '*_int*_t'.

ORDER: the ops, comma-separated. Run with MQS_CACHE as for the script.
"""
import difflib
import glob
import os
import re
import subprocess
import sys
import tempfile
from multiprocessing import Pool

LIB = "usr/lib/x86_64-linux-gnu/libmpich.so.12.2.2"
WORK = os.path.join(os.environ.get("MQS_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mqs"),
    "rebuild", "mpich-4.0.2-3+b1")
YAKSA = os.path.join(WORK, "src", "mpich-4.0.2", "modules", "yaksa")
PUP = "src/backend/seq/pup"
CASE = re.compile(r"^(\s*)case YAKSA_OP__(\w+):\s*$")


def run(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def fdes(lib):
    out = run("readelf", "--debug-dump=frames", lib)
    return sorted((int(a, 16), int(b, 16)) for a, b in re.findall(r"pc=([0-9a-f]+)\.\.([0-9a-f]+)", out))


def stock_places():
    """Function name -> (offset in the stock file, size), by FDE index."""
    rebuilt = os.path.join(WORK, "rebuilt", LIB)
    build_id = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", rebuilt)).group(1)
    debug = os.path.join(WORK, "dbgsym/usr/lib/debug/.build-id", build_id[:2], build_id[2:] + ".debug")
    names = {}
    for line in run("nm", "--defined-only", debug).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            names[int(parts[0], 16)] = parts[2]
    places = {}
    for (s0, s1), (r0, _) in zip(fdes(os.path.join(WORK, "stock", LIB)), fdes(rebuilt)):
        if r0 in names:
            places[names[r0]] = (s0, s1 - s0)  # .text's file offset is its address here
    return places


def compiler():
    """The buildd's command line for a yaksa pup object, from the build log."""
    with open(os.path.join(WORK, "build.log"), errors="replace") as log:
        for line in log:
            if line.startswith("libtool: compile:") and "yaksuri_seqi_pup_" in line:
                return line.split(":", 2)[2].split()
    sys.exit("no yaksa pup compile line in %s/build.log" % WORK)


def reorder(text, order):
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = CASE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, blocks, seen = m.group(1), {}, []
        while i < len(lines) and (m := CASE.match(lines[i])) and m.group(1) == indent:
            name, body = m.group(2), [lines[i]]
            i += 1
            while i < len(lines) and not (CASE.match(lines[i]) and CASE.match(lines[i]).group(1) == indent) \
                    and lines[i] != indent + "default:":
                body.append(lines[i])
                i += 1
            blocks[name] = body
            seen.append(name)
        for name in [o for o in order if o in blocks] + [n for n in seen if n not in order]:
            out.extend(blocks[name])
    return "\n".join(out)


def only(text, function):
    """The file's preamble and one of its functions."""
    lines, head, body, k = text.split("\n"), [], None, 0
    started = False
    while k < len(lines):
        m = re.match(r"^int (yaksuri_\w+)\(", lines[k])
        if m:
            j = k
            while lines[j] != "}":
                j += 1
            if m.group(1) == function:
                body = lines[k:j + 1]
            k, started = j + 1, True
            continue
        if not started:
            head.append(lines[k])
        k += 1
    return "\n".join(head + body) + "\n"


def compile_text(cc, rel_dir, text):
    """Compiles `text` as a file of rel_dir; returns (.text bytes, masked offsets, functions)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(YAKSA, rel_dir, ".mqs-order-%d.c" % os.getpid())
        obj = os.path.join(tmp, "v.o")
        with open(src, "w") as f:
            f.write(text)
        args = list(cc)
        args[args.index("-c") + 1] = src
        args[args.index("-o") + 1] = obj
        try:
            subprocess.run(args, cwd=YAKSA, check=True)
        finally:
            os.remove(src)
        run("objcopy", "-O", "binary", "--only-section=.text", obj, obj + ".bin")
        data = open(obj + ".bin", "rb").read()
        masked, section = set(), None
        for line in run("readelf", "-rW", obj).splitlines():
            if line.startswith("Relocation section"):
                section = line.split("'")[1]
            elif section == ".rela.text" and re.match(r"^[0-9a-f]{16} ", line):
                off = int(line.split()[0], 16)
                masked.update(range(off, off + 4))
        functions = []
        for line in run("nm", "-S", "--defined-only", obj).splitlines():
            p = line.split()
            if len(p) == 4 and p[2] in "tT":
                functions.append((p[3], int(p[0], 16), int(p[1], 16)))
        return data, masked, functions


def file_of(function):
    base = re.sub(r"^yaksuri_seqi_(un)?pack_", "", function)
    return "%s/yaksuri_seqi_pup_%s.c" % (PUP, re.sub(r"_blklen_(\d+|generic)", "", base))


STATE = {}


def setup():
    STATE["stock"] = open(os.path.join(WORK, "stock", LIB), "rb").read()
    STATE["places"] = stock_places()
    STATE["cc"] = compiler()


def same(name, data, masked, off, size):
    s0, ssize = STATE["places"][name]
    stock = STATE["stock"]
    return size == ssize and all(stock[s0 + k - off] == data[k] for k in range(off, off + size) if k not in masked)


def check_file(args):
    path, order = args
    data, masked, functions = compile_text(STATE["cc"], PUP, reorder(open(path).read(), order))
    return [(name, same(name, data, masked, off, size)) for name, off, size in functions]


def disassembly(code):
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        out = run("objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f.name)
    lines = []
    for line in out.splitlines()[7:]:
        parts = line.split("\t")
        if len(parts) >= 3:
            ins = parts[2].split("#")[0].strip()
            if ins.startswith(("j", "call")) or "rip" in ins:
                ins = ins.split()[0]  # their targets move with the layout
            lines.append(ins)
    return lines


def distance(args):
    function, order = args
    text = open(os.path.join(YAKSA, file_of(function))).read()
    data, _, functions = compile_text(STATE["cc"], PUP, only(reorder(text, order), function))
    _, off, size = functions[0]
    s0, ssize = STATE["places"][function]
    ours, stock = disassembly(data[off:off + size]), disassembly(STATE["stock"][s0:s0 + ssize])
    ops = difflib.SequenceMatcher(None, stock, ours, autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("check", "search"):
        sys.exit(__doc__)
    order = sys.argv[2].split(",")
    with Pool(os.cpu_count() or 2, initializer=setup) as pool:
        if sys.argv[1] == "check":
            files = sorted(glob.glob(os.path.join(YAKSA, PUP, "yaksuri_seqi_pup_%s.c" % sys.argv[3])))
            results = [r for rs in pool.map(check_file, [(f, order) for f in files]) for r in rs]
            bad = [n for n, ok in results if not ok]
            print("%d of %d functions in %d files compile to the stock bytes" % (
                len(results) - len(bad), len(results), len(files)))
            for name in bad[:10]:
                print("  differs:", name)
            sys.exit(1 if bad or not results else 0)
        functions = sys.argv[3:]
        score = lambda o: sum(pool.map(distance, [(f, o) for f in functions]))
        best = score(order)
        print(best, " ".join(order), flush=True)
        while best > 0:
            moves = []
            for i in range(1, len(order) - 1):
                for j in range(1, len(order) - 1):
                    if i != j:
                        p = list(order)
                        p.insert(j, p.pop(i))
                        if p not in moves:
                            moves.append(p)
            scored = min(((score(p), p) for p in moves), key=lambda x: x[0])
            if scored[0] >= best:
                print("no single move brings it closer", flush=True)
                sys.exit(1)
            best, order = scored
            print(best, " ".join(order), flush=True)


if __name__ == "__main__":
    main()
