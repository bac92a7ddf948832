# gdb -batch -nx -p PID -x dump_types_mpich.py  (env MQS_TYPES_OUT=file.json)
# For an MPICH rank: what a debugger's find_type/field_offset/sizeof/
# find_symbol would answer for every type and symbol the mqs DLL's MPICH
# backend may ask about, as JSON (the types the build has; the others,
# ch4's or 4.1's, are simply absent).
import json
import os

import gdb

TYPES = """
MPIR_Comm_list MPIR_Context_id_t MPI_Aint MPIR_Request MPIDI_Request
MPIDI_Message_match_parts_t MPIDI_Rank_t MPIDI_Devreq_t MPIDIG_req_t MPIDIG_req_ext_t
MPI_Status MPIR_Comm MPIR_Group MPII_Group_pmap_t MPIR_Debugq MPIR_Sendq MPIR_Datatype
MPIR_Object_alloc_t MPIDI_CH3I_comm_t MPIDI_VCRT_t MPIDI_VCRT MPIDI_VC_t MPIDI_Devcomm_t
MPIDI_rank_map_t MPIDI_OFI_global_t MPIDI_OFI_capabilities_t MPIDI_CH4_Global_t
""".split()

SYMBOLS = """
MPIR_All_communicators MPID_Recvq_posted_head_ptr MPID_Recvq_unexpected_head_ptr
MPIR_Sendq_head MPIR_Recvq_head MPIR_Unexpq_head MPIR_Datatype_builtin
MPIR_Datatype_direct MPIR_Datatype_mem MPII_Version_string MPII_Version_device
MPIDI_OFI_global MPIDI_global MPIR_CVAR_CH4_OFI_ENABLE_TAGGED MPIR_CVAR_CH4_NUM_VCIS
MPII_Wait_for_debugger MPIR_dll_name MPIR_Ignore_queues
""".split()


def lookup(name):
    """The type and whether it is known only by its tag (no typedef: a
    debugger evaluating `sizeof(NAME)` does not find it)."""
    try:
        return gdb.lookup_type(name), False
    except gdb.error:
        pass
    for candidate in ("struct " + name, "union " + name):
        try:
            return gdb.lookup_type(candidate), True
        except gdb.error:
            pass
    if name.endswith("_t"):
        for candidate in ("struct " + name[:-2], "union " + name[:-2]):
            try:
                return gdb.lookup_type(candidate), True
            except gdb.error:
                pass
    return None, False


types = {}
for name in TYPES:
    t, tag_only = lookup(name)
    if t is None:
        continue
    s = t.strip_typedefs()
    fields = {}
    if s.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        for f in s.fields():
            if f.name is not None and hasattr(f, "bitpos"):
                fields[f.name] = f.bitpos // 8
    types[name] = {"size": s.sizeof, "fields": fields}
    if tag_only:
        types[name]["tag_only"] = True

symbols = {}
for name in SYMBOLS:
    try:
        v = gdb.parse_and_eval("(unsigned long)&" + name)
        symbols[name] = int(v)
    except gdb.error:
        pass

out = os.environ.get("MQS_TYPES_OUT", "/dev/stdout")
with open(out, "w") as f:
    json.dump({"types": types, "symbols": symbols}, f, indent=1, sort_keys=True)
