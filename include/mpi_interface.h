/*
 * mpi_interface.h: the message-queue debugging ("mqs") interface between a
 * debugger and a message-queue DLL that an MPI library names in MPIR_dll_name.
 *
 * Written for the mqs project from the published facts of the interface; it is
 * binary-compatible with the header that TotalView, DDT, padb, Open MPI and
 * MPICH build against: same names, same order, same types, same sizes.
 *
 * Two sides meet here:
 *   - the debugger (the "host") owns mqs_image, mqs_process, mqs_job and
 *     mqs_type, and offers callbacks through the tables below;
 *   - the DLL owns mqs_image_info, mqs_process_info and mqs_job_info, and
 *     exports the mqs_* entry points at the end of this file.
 * Each side only hands the other's pointers back; neither looks inside them.
 *
 * Define FOR_MPI2 to a non-zero value before including this header (or on the
 * compiler command line) to get the MPI-2 (dynamic process) extension:
 * compatibility level 3, the job object, larger callback tables and the
 * MPI-2 entry points. Without it the header describes compatibility level 2,
 * which is what every DLL shipped by an MPI implements.
 */
#ifndef MQS_MPI_INTERFACE_H
#define MQS_MPI_INTERFACE_H

#include <stddef.h> /* size_t */
#include <stdio.h>  /* FILENAME_MAX, used by mqs_process_location */

#ifndef FOR_MPI2
#define FOR_MPI2 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The interface level this header describes. A host compares it with the
 * DLL's mqs_version_compatibility() and passes callback tables of the
 * matching shape; a host that knows only level 2 must refuse a level-3 DLL. */
enum {
#if FOR_MPI2
    MQS_INTERFACE_COMPATIBILITY = 3
#else
    MQS_INTERFACE_COMPATIBILITY = 2
#endif
};

/* ---------------------------------------------------------------------------
 * Opaque handles.
 * ------------------------------------------------------------------------ */

/* Owned by the DLL, stored in the debugger with the put_*_info callbacks. */
typedef struct _mqs_image_info mqs_image_info;
typedef struct _mqs_process_info mqs_process_info;
#if FOR_MPI2
typedef struct _mqs_job_info mqs_job_info;
#endif

/* Owned by the debugger, passed to the DLL, only ever passed back. */
typedef struct mqs_image_ mqs_image;
#if FOR_MPI2
typedef struct mqs_job_ mqs_job;
#endif
typedef struct mqs_process_ mqs_process;
typedef struct mqs_type_ mqs_type;

/* Target addresses and words. They must hold a 64-bit target's values even
 * in a host built for 32 bits, hence long long on the platforms that had two
 * pointer models, unless FORCE_32BIT_MPI says otherwise. */
#if !defined(FORCE_32BIT_MPI) && \
    (defined(__sgi) || defined(__hpux) || defined(_AIX) || defined(__sun))
typedef unsigned long long mqs_taddr_t;
typedef long long mqs_tword_t;
#else
typedef unsigned long mqs_taddr_t;
typedef long mqs_tword_t;
#endif

/* ---------------------------------------------------------------------------
 * Structures that cross the interface.
 * ------------------------------------------------------------------------ */

/* Sizes of the target's basic types, filled by the host's get_type_sizes.
 * Exactly these five ints: some MPIs' private copies append more fields,
 * which hosts do not fill, so a DLL must not read past pointer_size. */
typedef struct {
    int short_size;     /* sizeof(short) in the target */
    int int_size;       /* sizeof(int) */
    int long_size;      /* sizeof(long) */
    int long_long_size; /* sizeof(long long) */
    int pointer_size;   /* sizeof(void *) */
} mqs_target_type_sizes;

/* Result codes. Functions return int rather than this enum so that the
 * width never depends on a compiler's choice for enums. Codes from
 * mqs_first_user_code up are private to the side that returned them and are
 * turned into text only by that side (mqs_dll_error_string, errorstring). */
enum {
    mqs_ok = 0,             /* success; for mqs_next_*: an element was written */
    mqs_no_information = 1, /* nothing is known: shown as "not available" */
    mqs_end_of_list = 2,    /* the iteration is over; nothing was written */
    mqs_first_user_code = 100
};

#if FOR_MPI2
/* Where a process that the MPI created or connected to lives, as reported by
 * mqs_next_new_process so that the debugger can attach to it. */
typedef struct mqs_process_location {
    long pid;
    char image_name[FILENAME_MAX]; /* executable path */
    char host_name[64];            /* host it runs on */
} mqs_process_location;
#endif

/* Source language of a name given to find_function / find_type. */
typedef enum {
    mqs_lang_c = 'c',
    mqs_lang_cplus = 'C',
    mqs_lang_f77 = 'f',
    mqs_lang_f90 = 'F'
} mqs_lang_code;

/* The three queues of a communicator (passed to
 * mqs_setup_operation_iterator as an int). */
typedef enum {
    mqs_pending_sends = 0,
    mqs_pending_receives = 1,
    mqs_unexpected_messages = 2
} mqs_op_class;

/* A process index that names no process. */
enum { MQS_INVALID_PROCESS = -1 };

/* State of a pending operation (stored in mqs_pending_operation.status). */
enum mqs_status {
    mqs_st_pending = 0,  /* posted, nothing matched yet */
    mqs_st_matched = 1,  /* matched, data still moving */
    mqs_st_complete = 2  /* done, not yet waited for */
};

/* One communicator as the DLL describes it (88 bytes on LP64). */
typedef struct {
    mqs_taddr_t unique_id;  /* stable and unique within the process */
    mqs_tword_t local_rank; /* this process's rank in it */
    mqs_tword_t size;       /* number of processes (local group) */
    char name[64];          /* NUL-terminated name, if it has one */
} mqs_communicator;

/* One pending send, posted receive or unexpected message (416 bytes on
 * LP64). The host zeroes it before each mqs_next_operation call because DLLs
 * fill only what they know. Ranks are local to the current communicator
 * (-1 for any source), global ranks are in MPI_COMM_WORLD (or, with MPI-2,
 * the identities the debugger assigned). */
typedef struct {
    /* Valid for every operation. */
    int status;                      /* an enum mqs_status value */
    mqs_tword_t desired_local_rank;  /* peer, -1 for MPI_ANY_SOURCE */
    mqs_tword_t desired_global_rank; /* the same peer in COMM_WORLD */
    int tag_wild;                    /* non-zero for MPI_ANY_TAG */
    mqs_tword_t desired_tag;         /* meaningful only if !tag_wild */
    mqs_tword_t desired_length;      /* buffer length in bytes */
    int system_buffer;               /* non-zero: the MPI's buffer, not the user's */
    mqs_taddr_t buffer;              /* address of the data */

    /* Valid once status >= mqs_st_matched, and always for sends. */
    mqs_tword_t actual_local_rank;
    mqs_tword_t actual_global_rank;
    mqs_tword_t actual_tag;
    mqs_tword_t actual_length;

    /* Free text shown to the user, up to five lines of 64 characters, each
     * NUL-terminated; display stops at the first empty line. */
    char extra_text[5][64];
} mqs_pending_operation;

/* ---------------------------------------------------------------------------
 * Callbacks the debugger offers the DLL (function pointer types).
 * ------------------------------------------------------------------------ */

/* Attach the DLL's per-image data to an image, and get it back. */
typedef void (*mqs_put_image_info_ft)(mqs_image *, mqs_image_info *);
typedef mqs_image_info *(*mqs_get_image_info_ft)(mqs_image *);

#if FOR_MPI2
/* The process with the given identity in a job. */
typedef mqs_process *(*mqs_get_process_ft)(mqs_job *, int);

/* Attach the DLL's per-job data to a job, and get it back. */
typedef void (*mqs_put_job_info_ft)(mqs_job *, mqs_job_info *);
typedef mqs_job_info *(*mqs_get_job_info_ft)(mqs_job *);
#endif

/* The image a process runs. */
typedef mqs_image *(*mqs_get_image_ft)(mqs_process *);

/* A process's rank in MPI_COMM_WORLD. */
typedef int (*mqs_get_global_rank_ft)(mqs_process *);

/* Address of a function in an image. Returns mqs_ok or a debugger error.
 * The out-pointer may be NULL: the DLL only asks whether it exists. */
typedef int (*mqs_find_function_ft)(mqs_image *, char *, mqs_lang_code,
                                    mqs_taddr_t *);

/* Address of a data symbol in an image (file-static ones included).
 * The out-pointer may be NULL, as above. */
typedef int (*mqs_find_symbol_ft)(mqs_image *, char *, mqs_taddr_t *);

/* Attach the DLL's per-process data to a process, and get it back. */
typedef void (*mqs_put_process_info_ft)(mqs_process *, mqs_process_info *);
typedef mqs_process_info *(*mqs_get_process_info_ft)(mqs_process *);

#if FOR_MPI2
/* The job a process belongs to. */
typedef mqs_job *(*mqs_get_process_job_ft)(mqs_process *);
/* A process's identity in its job. The parameter type is mqs_job * in the
 * header every implementation uses (a historical slip kept for ABI
 * compatibility); hosts pass the mqs_process * they were given. */
typedef int (*mqs_get_process_identity_ft)(mqs_job *);
#endif

/* Memory for the DLL: it allocates through the debugger. malloc(0) and
 * free(NULL) must both be accepted. */
typedef void *(*mqs_malloc_ft)(size_t);
typedef void (*mqs_free_ft)(void *);

/* A named type in an image (typedef names and struct tags, searched in the
 * executable and every loaded shared object), or NULL if unknown. */
typedef mqs_type *(*mqs_find_type_ft)(mqs_image *, char *, mqs_lang_code);

/* Byte offset of a top-level member of a struct type, -1 if it has none. */
typedef int (*mqs_field_offset_ft)(mqs_type *, char *);

/* Size of a type in bytes, like sizeof. */
typedef int (*mqs_sizeof_ft)(mqs_type *);

/* Sizes of the target's basic types (fills the five ints). */
typedef void (*mqs_get_type_sizes_ft)(mqs_process *, mqs_target_type_sizes *);

/* Copy size bytes at a target address into buf, as raw target bytes.
 * Returns mqs_ok only if every byte was read. */
typedef int (*mqs_fetch_data_ft)(mqs_process *, mqs_taddr_t, int, void *);

/* Convert size bytes of a target scalar to host byte order. */
typedef void (*mqs_target_to_host_ft)(mqs_process *, const void *, void *,
                                      int);

/* Print a line of DLL debugging output. */
typedef void (*mqs_dprints_ft)(const char *);

/* Text for one of the debugger's own error codes. */
typedef char *(*mqs_errorstring_ft)(int);

/* ---------------------------------------------------------------------------
 * Callback tables. The debugger owns them and keeps them valid for as long as
 * the DLL is loaded; the DLL keeps only the pointer. Field order is ABI.
 * ------------------------------------------------------------------------ */

/* 64 bytes on LP64, 80 with FOR_MPI2. */
typedef struct mqs_basic_callbacks {
    mqs_malloc_ft mqs_malloc_fp;
    mqs_free_ft mqs_free_fp;
    mqs_dprints_ft mqs_dprints_fp;
    mqs_errorstring_ft mqs_errorstring_fp;
    mqs_put_image_info_ft mqs_put_image_info_fp;
    mqs_get_image_info_ft mqs_get_image_info_fp;
    mqs_put_process_info_ft mqs_put_process_info_fp;
    mqs_get_process_info_ft mqs_get_process_info_fp;
#if FOR_MPI2
    mqs_put_job_info_ft mqs_put_job_info_fp;
    mqs_get_job_info_ft mqs_get_job_info_fp;
#endif
} mqs_basic_callbacks;

#if FOR_MPI2
/* 8 bytes on LP64. */
typedef struct mqs_job_callbacks {
    mqs_get_process_ft mqs_get_process_fp;
} mqs_job_callbacks;
#endif

/* 48 bytes on LP64. */
typedef struct mqs_image_callbacks {
    mqs_get_type_sizes_ft mqs_get_type_sizes_fp;
    mqs_find_function_ft mqs_find_function_fp;
    mqs_find_symbol_ft mqs_find_symbol_fp;
    mqs_find_type_ft mqs_find_type_fp;
    mqs_field_offset_ft mqs_field_offset_fp;
    mqs_sizeof_ft mqs_sizeof_fp;
} mqs_image_callbacks;

/* 32 bytes on LP64, 48 with FOR_MPI2. */
typedef struct mqs_process_callbacks {
    mqs_get_global_rank_ft mqs_get_global_rank_fp;
    mqs_get_image_ft mqs_get_image_fp;
    mqs_fetch_data_ft mqs_fetch_data_fp;
    mqs_target_to_host_ft mqs_target_to_host_fp;
#if FOR_MPI2
    mqs_get_process_job_ft mqs_get_process_job_fp;
    mqs_get_process_identity_ft mqs_get_process_identity_fp;
#endif
} mqs_process_callbacks;

/* ---------------------------------------------------------------------------
 * Entry points the DLL exports (C linkage), called by the debugger.
 * Calling order: mqs_setup_basic_callbacks; the version checks; per image
 * mqs_setup_image and mqs_image_has_queues; per process mqs_setup_process and
 * mqs_process_has_queues; then mqs_update_communicator_list and the
 * iterators. Strings the DLL returns are static and never freed. The DLL must
 * not block, must not abort, and stays loaded for the debugger's lifetime.
 * ------------------------------------------------------------------------ */

/* Called first and once: keep the pointer to the debugger's basic table. */
extern void mqs_setup_basic_callbacks(const mqs_basic_callbacks *);

/* A human-readable name and version of the DLL (static string). */
extern char *mqs_version_string(void);

/* The interface level the DLL implements: MQS_INTERFACE_COMPATIBILITY of the
 * header it was built with (2, or 3 for FOR_MPI2). */
extern int mqs_version_compatibility(void);

/* sizeof(mqs_taddr_t) in the DLL; the debugger refuses a mismatch. */
extern int mqs_dll_taddr_width(void);

/* Text for one of the DLL's own error codes (static string). */
extern char *mqs_dll_error_string(int);

/* Per image: keep the image callbacks and attach the DLL's image data with
 * put_image_info. Called once for every executable image of the job. */
extern int mqs_setup_image(mqs_image *, const mqs_image_callbacks *);

/* Whether the image can show message queues. On failure *message may point
 * to a static printf format with one %s, which the debugger fills with the
 * image name; it may be NULL. Returns mqs_ok if queues can be shown. */
extern int mqs_image_has_queues(mqs_image *, char **);

/* The debugger no longer needs this image's data: release it. */
extern void mqs_destroy_image_info(mqs_image_info *);

#if FOR_MPI2
/* Per job: keep the job callbacks and attach the DLL's job data. */
extern int mqs_setup_job(mqs_job *, const mqs_job_callbacks *);

/* Release a job's data; called after all of its processes are destroyed.
 * Returns an int, unlike the other destroy functions. */
extern int mqs_destroy_job_info(mqs_job_info *);
#endif

/* Per process: keep the process callbacks, attach the DLL's process data.
 * Only called for processes whose image has queues. */
extern int mqs_setup_process(mqs_process *, const mqs_process_callbacks *);

/* Release a process's data. */
extern void mqs_destroy_process_info(mqs_process_info *);

/* Whether this live process can show its queues (may read its memory).
 * *message as for mqs_image_has_queues. */
extern int mqs_process_has_queues(mqs_process *, char **);

/* Bring the DLL's view of the process's communicators up to date. */
extern int mqs_update_communicator_list(mqs_process *);

/* Start iterating over communicators: mqs_ok, mqs_no_information or
 * mqs_end_of_list (none; see mqs_setup_operation_iterator). */
extern int mqs_setup_communicator_iterator(mqs_process *);

/* Describe the current communicator. */
extern int mqs_get_communicator(mqs_process *, mqs_communicator *);

/* Global ranks of the current communicator's members, into an array of
 * size elements that the debugger allocated. Optional: not every DLL
 * exports it. */
extern int mqs_get_comm_group(mqs_process *, int *);

/* An mqs extension, in no MPI's header: the current communicator's
 * Cartesian topology (MPI_Cart_create), so that a debugger can name a
 * peer by its offset on the grid. Writes the number of dimensions to
 * *ndims and, when it is at most max_dims, the extent of each dimension
 * to dims and whether it is periodic (1) or not (0) to periods, arrays of
 * max_dims ints the debugger allocated. A rank's coordinates follow from
 * its rank in the communicator (row-major, as MPI_Cart_coords gives
 * them). mqs_ok: written; mqs_no_information: the communicator has no
 * Cartesian topology, or the DLL cannot tell. Optional: a debugger must
 * look it up by name and cope without it. */
extern int mqs_get_comm_cartesian(mqs_process *, int max_dims, int *ndims,
                                  int *dims, int *periods);

/* Step to the next communicator: mqs_ok or mqs_end_of_list. A debugger
 * must not call it again after mqs_end_of_list. */
extern int mqs_next_communicator(mqs_process *);

/* Start iterating over one queue (an mqs_op_class value) of the current
 * communicator: mqs_ok, mqs_no_information (queue not available) or
 * mqs_end_of_list (queue empty). For an empty queue both are legal, mqs_ok
 * (then mqs_next_operation answers mqs_end_of_list at once) and
 * mqs_end_of_list, and hosts must accept both; DLLs had better answer
 * mqs_ok, as the MPIs' own DLLs do: some hosts (padb) take mqs_end_of_list
 * from a setup call for a failure. */
extern int mqs_setup_operation_iterator(mqs_process *, int);

/* The next operation of that queue: mqs_ok (written), mqs_end_of_list
 * (nothing written) or an error. */
extern int mqs_next_operation(mqs_process *, mqs_pending_operation *);

#if FOR_MPI2
/* Start iterating over processes the MPI created or connected to: mqs_ok,
 * mqs_no_information or mqs_end_of_list (none; both legal for none, as for
 * mqs_setup_operation_iterator). */
extern int mqs_setup_new_process_iterator(mqs_process *);

/* The next such process, for the debugger to attach to. */
extern int mqs_next_new_process(mqs_process *, mqs_process_location *);

/* After attaching and setting a process up, the debugger tells the DLL the
 * identity (index in the job's universe, COMM_WORLD first) it gave it. */
extern int mqs_set_process_identity(mqs_process *, int);

/* The name of the function on which the debugger should set a breakpoint to
 * learn about spawned processes, copied into buf (at most buflen bytes,
 * NUL-terminated). */
extern int mqs_spawn_breakpoint_name(mqs_process *, char *, int);
#endif

#ifdef __cplusplus
}
#endif

#endif /* MQS_MPI_INTERFACE_H */
