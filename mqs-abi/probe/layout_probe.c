/* What the C compiler says about every struct of mpi_interface.h: the size of
 * each struct and the offset and size of each field. Compiled once per
 * interface level by build.rs; read by tests/layout.rs. */
#include <stddef.h>
#include "mpi_interface.h"

struct mqs_abi_probe_entry {
    const char *type_name;
    const char *field_name; /* NULL: the entry describes the whole struct */
    size_t offset;
    size_t size;
};

#define STRUCT(T) {#T, NULL, 0, sizeof(T)}
#define FIELD(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}

const struct mqs_abi_probe_entry PROBE_NAME[] = {
    STRUCT(mqs_target_type_sizes),
    FIELD(mqs_target_type_sizes, short_size),
    FIELD(mqs_target_type_sizes, int_size),
    FIELD(mqs_target_type_sizes, long_size),
    FIELD(mqs_target_type_sizes, long_long_size),
    FIELD(mqs_target_type_sizes, pointer_size),

    STRUCT(mqs_communicator),
    FIELD(mqs_communicator, unique_id),
    FIELD(mqs_communicator, local_rank),
    FIELD(mqs_communicator, size),
    FIELD(mqs_communicator, name),

    STRUCT(mqs_pending_operation),
    FIELD(mqs_pending_operation, status),
    FIELD(mqs_pending_operation, desired_local_rank),
    FIELD(mqs_pending_operation, desired_global_rank),
    FIELD(mqs_pending_operation, tag_wild),
    FIELD(mqs_pending_operation, desired_tag),
    FIELD(mqs_pending_operation, desired_length),
    FIELD(mqs_pending_operation, system_buffer),
    FIELD(mqs_pending_operation, buffer),
    FIELD(mqs_pending_operation, actual_local_rank),
    FIELD(mqs_pending_operation, actual_global_rank),
    FIELD(mqs_pending_operation, actual_tag),
    FIELD(mqs_pending_operation, actual_length),
    FIELD(mqs_pending_operation, extra_text),

    STRUCT(mqs_basic_callbacks),
    FIELD(mqs_basic_callbacks, mqs_malloc_fp),
    FIELD(mqs_basic_callbacks, mqs_free_fp),
    FIELD(mqs_basic_callbacks, mqs_dprints_fp),
    FIELD(mqs_basic_callbacks, mqs_errorstring_fp),
    FIELD(mqs_basic_callbacks, mqs_put_image_info_fp),
    FIELD(mqs_basic_callbacks, mqs_get_image_info_fp),
    FIELD(mqs_basic_callbacks, mqs_put_process_info_fp),
    FIELD(mqs_basic_callbacks, mqs_get_process_info_fp),
#if FOR_MPI2
    FIELD(mqs_basic_callbacks, mqs_put_job_info_fp),
    FIELD(mqs_basic_callbacks, mqs_get_job_info_fp),
#endif

    STRUCT(mqs_image_callbacks),
    FIELD(mqs_image_callbacks, mqs_get_type_sizes_fp),
    FIELD(mqs_image_callbacks, mqs_find_function_fp),
    FIELD(mqs_image_callbacks, mqs_find_symbol_fp),
    FIELD(mqs_image_callbacks, mqs_find_type_fp),
    FIELD(mqs_image_callbacks, mqs_field_offset_fp),
    FIELD(mqs_image_callbacks, mqs_sizeof_fp),

    STRUCT(mqs_process_callbacks),
    FIELD(mqs_process_callbacks, mqs_get_global_rank_fp),
    FIELD(mqs_process_callbacks, mqs_get_image_fp),
    FIELD(mqs_process_callbacks, mqs_fetch_data_fp),
    FIELD(mqs_process_callbacks, mqs_target_to_host_fp),
#if FOR_MPI2
    FIELD(mqs_process_callbacks, mqs_get_process_job_fp),
    FIELD(mqs_process_callbacks, mqs_get_process_identity_fp),

    STRUCT(mqs_job_callbacks),
    FIELD(mqs_job_callbacks, mqs_get_process_fp),

    STRUCT(mqs_process_location),
    FIELD(mqs_process_location, pid),
    FIELD(mqs_process_location, image_name),
    FIELD(mqs_process_location, host_name),
#endif
    {NULL, NULL, 0, 0},
};
