# gdb -batch -p PID -x dump_types.py  (env MQS_TYPES_OUT=file.json)
# Dumps, for every type and symbol the mqs DLL may ask about, what a
# debugger's find_type/field_offset/sizeof/find_symbol would answer, as JSON.
import json
import os

import gdb

TYPES = """
opal_list_item_t opal_list_t opal_free_list_item_t opal_free_list_t opal_object_t
ompi_request_t ompi_status_public_t mca_pml_base_request_t mca_pml_base_send_request_t
mca_pml_base_recv_request_t opal_pointer_array_t ompi_communicator_t ompi_group_t
ompi_group_sporadic_data_t ompi_group_sporadic_list_t ompi_group_strided_data_t
ompi_group_bitmap_data_t ompi_datatype_t opal_datatype_t opal_proc_t
mca_pml_ob1_comm_t mca_pml_ob1_comm_proc_t mca_pml_ob1_recv_frag_t mca_btl_base_segment_t
mca_pml_ob1_common_hdr_t mca_pml_ob1_match_hdr_t mca_pml_ob1_rendezvous_hdr_t
mca_pml_ob1_hdr_t mca_pml_ob1_send_request_t mca_pml_ob1_recv_request_t
mca_btl_vader_component_t mca_btl_vader_endpoint_t mca_btl_vader_hdr_t vader_fifo_t
opal_process_info_t mca_topo_base_module_t mca_topo_base_comm_cart_2_2_0_t
""".split()

SYMBOLS = """
ompi_mpi_communicators mca_pml_base_send_requests mca_pml_base_recv_requests
ompi_mpi_comm_world ompi_mpi_comm_null MPIR_debug_typedefs_sizeof MPIR_Ignore_queues
mca_pml_base_selected_component mca_pml_ob1_comm_t_class ompi_proc_list
ompi_proc_local_proc ompi_debugger_setup_dlls
mca_btl_vader_component opal_process_info mca_btl_base_modules_initialized
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
