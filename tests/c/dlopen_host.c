/*
 * dlopen_host.c: loads a message-queue DLL exactly as a C debugger does and
 * checks the parts of the contract that need no live process.
 *
 *   dlopen_host PATH_TO_DLL
 *
 * Compiled against include/mpi_interface.h (with -DFOR_MPI2=1 for the
 * MPI-2 build). Every entry point is looked up with dlsym into a pointer of
 * the header's own prototype type; the setup sequence runs with C
 * callbacks over a fake image that has no types at all, as an MPI built
 * without debug information looks. Prints one line per check and
 * "N passed, M failed" at the end; exits non-zero on any failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_interface.h"

static int passed, failed;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    if (ok)
        passed++;
    else
        failed++;
}

/* ---- the debugger's side: one image, one process, no types -------------- */

struct image {
    mqs_image_info *info;
    int has_ignore_queues; /* pretend MPIR_Ignore_queues exists */
    int find_type_calls;
};
struct process {
    mqs_process_info *info;
    struct image *image;
};
#if FOR_MPI2
struct job {
    mqs_job_info *info;
};
#endif

static int mallocs, frees;

static void *cb_malloc(size_t n) { mallocs++; return malloc(n ? n : 1); }
static void cb_free(void *p) { if (p) frees++; free(p); }
static void cb_dprints(const char *s) { (void)s; }
static char *cb_errorstring(int code) { (void)code; return (char *)"host error"; }
static void cb_put_image_info(mqs_image *i, mqs_image_info *info) { ((struct image *)i)->info = info; }
static mqs_image_info *cb_get_image_info(mqs_image *i) { return ((struct image *)i)->info; }
static void cb_put_process_info(mqs_process *p, mqs_process_info *info) { ((struct process *)p)->info = info; }
static mqs_process_info *cb_get_process_info(mqs_process *p) { return ((struct process *)p)->info; }
#if FOR_MPI2
static void cb_put_job_info(mqs_job *j, mqs_job_info *info) { ((struct job *)j)->info = info; }
static mqs_job_info *cb_get_job_info(mqs_job *j) { return ((struct job *)j)->info; }
static mqs_process *cb_get_process(mqs_job *j, int id) { (void)j; (void)id; return NULL; }
#endif

static void cb_get_type_sizes(mqs_process *p, mqs_target_type_sizes *s)
{
    (void)p;
    s->short_size = 2;
    s->int_size = 4;
    s->long_size = 8;
    s->long_long_size = 8;
    s->pointer_size = 8;
}

static int cb_find_function(mqs_image *i, char *name, mqs_lang_code lang, mqs_taddr_t *addr)
{
    (void)i; (void)name; (void)lang; (void)addr;
    return mqs_first_user_code; /* nothing */
}

static int cb_find_symbol(mqs_image *i, char *name, mqs_taddr_t *addr)
{
    struct image *image = (struct image *)i;
    /* Symbols exist (an MPI library is there) but no types do. */
    if (strcmp(name, "MPIR_Ignore_queues") == 0 && !image->has_ignore_queues)
        return mqs_first_user_code;
    if (addr)
        *addr = 0x1000;
    return mqs_ok;
}

static mqs_type *cb_find_type(mqs_image *i, char *name, mqs_lang_code lang)
{
    (void)name; (void)lang;
    ((struct image *)i)->find_type_calls++;
    return NULL;
}

static int cb_field_offset(mqs_type *t, char *f) { (void)t; (void)f; return -1; }
static int cb_sizeof(mqs_type *t) { (void)t; return -1; }

static mqs_image *cb_get_image(mqs_process *p) { return (mqs_image *)((struct process *)p)->image; }
static int cb_get_global_rank(mqs_process *p) { (void)p; return 0; }
static int cb_fetch_data(mqs_process *p, mqs_taddr_t a, int n, void *buf)
{
    (void)p; (void)a;
    memset(buf, 0, (size_t)(n > 0 ? n : 0));
    return mqs_ok;
}
static void cb_target_to_host(mqs_process *p, const void *in, void *out, int n)
{
    (void)p;
    memcpy(out, in, (size_t)(n > 0 ? n : 0));
}
#if FOR_MPI2
static mqs_job *cb_get_process_job(mqs_process *p) { (void)p; return NULL; }
static int cb_get_process_identity(mqs_job *p) { (void)p; return 0; }
#endif

static const mqs_basic_callbacks basic = {
    cb_malloc, cb_free, cb_dprints, cb_errorstring,
    cb_put_image_info, cb_get_image_info, cb_put_process_info, cb_get_process_info,
#if FOR_MPI2
    cb_put_job_info, cb_get_job_info,
#endif
};
static const mqs_image_callbacks image_cbs = {
    cb_get_type_sizes, cb_find_function, cb_find_symbol, cb_find_type, cb_field_offset, cb_sizeof,
};
static const mqs_process_callbacks process_cbs = {
    cb_get_global_rank, cb_get_image, cb_fetch_data, cb_target_to_host,
#if FOR_MPI2
    cb_get_process_job, cb_get_process_identity,
#endif
};
#if FOR_MPI2
static const mqs_job_callbacks job_cbs = {cb_get_process};
#endif

/* Looks an entry point up into a pointer of the header's prototype type. */
#define RESOLVE(name)                                                  \
    __typeof__(&name) p_##name = (__typeof__(&name))dlsym(dll, #name); \
    check(p_##name != NULL, "entry point " #name " resolves")

static int count_percent_s(const char *s)
{
    int n = 0;
    for (; s && *s; s++) {
        if (s[0] == '%' && s[1] == 's')
            n++;
        if (s[0] == '%' && s[1] != '\0')
            s++;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dlopen_host DLL\n");
        return 2;
    }
    void *dll = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    check(dll != NULL, "dlopen with RTLD_NOW");
    if (!dll) {
        fprintf(stderr, "%s\n", dlerror());
        printf("%d passed, %d failed\n", passed, failed);
        return 1;
    }

    RESOLVE(mqs_setup_basic_callbacks);
    RESOLVE(mqs_version_string);
    RESOLVE(mqs_version_compatibility);
    RESOLVE(mqs_dll_taddr_width);
    RESOLVE(mqs_dll_error_string);
    RESOLVE(mqs_setup_image);
    RESOLVE(mqs_image_has_queues);
    RESOLVE(mqs_destroy_image_info);
    RESOLVE(mqs_setup_process);
    RESOLVE(mqs_process_has_queues);
    RESOLVE(mqs_destroy_process_info);
    RESOLVE(mqs_update_communicator_list);
    RESOLVE(mqs_setup_communicator_iterator);
    RESOLVE(mqs_get_communicator);
    RESOLVE(mqs_get_comm_group);
    RESOLVE(mqs_next_communicator);
    RESOLVE(mqs_setup_operation_iterator);
    RESOLVE(mqs_next_operation);
#if FOR_MPI2
    RESOLVE(mqs_setup_job);
    RESOLVE(mqs_destroy_job_info);
    RESOLVE(mqs_set_process_identity);
    RESOLVE(mqs_setup_new_process_iterator);
    RESOLVE(mqs_next_new_process);
    RESOLVE(mqs_spawn_breakpoint_name);
#else
    check(dlsym(dll, "mqs_setup_job") == NULL, "the MPI-1 build exports no MPI-2 entry point");
#endif
    if (failed) {
        printf("%d passed, %d failed\n", passed, failed);
        return 1;
    }

    /* Version checks, in the order debuggers make them. */
    check(p_mqs_version_compatibility() == MQS_INTERFACE_COMPATIBILITY,
          "compatibility matches this header's level");
    check(p_mqs_dll_taddr_width() == (int)sizeof(mqs_taddr_t), "taddr width is sizeof(mqs_taddr_t)");
    p_mqs_setup_basic_callbacks(&basic);
    const char *version = p_mqs_version_string();
    check(version && strstr(version, "mqs") != NULL, "version string names the DLL");
    for (int code = 0; code < 200; code++) {
        const char *text = p_mqs_dll_error_string(code);
        if (!text || !*text) {
            printf("   code %d has no text\n", code);
            check(0, "every code has an error string");
            break;
        }
    }
    check(p_mqs_dll_error_string(-12345) != NULL, "an unknown code has an error string");

#if FOR_MPI2
    struct job job = {0};
    check(p_mqs_setup_job((mqs_job *)&job, &job_cbs) == mqs_ok, "mqs_setup_job");
#endif

    /* An image without debug information: has_queues fails with a message
     * that is a printf format with exactly one %s and names what is missing. */
    struct image image = {0};
    check(p_mqs_setup_image((mqs_image *)&image, &image_cbs) == mqs_ok, "mqs_setup_image");
    char *message = NULL;
    int rc = p_mqs_image_has_queues((mqs_image *)&image, &message);
    check(rc != mqs_ok, "has_queues fails without types");
    check(image.find_type_calls > 0, "the DLL asked for types");
    check(message != NULL && count_percent_s(message) == 1, "the message has exactly one %s");
    if (message) {
        char line[4096];
        snprintf(line, sizeof line, message, "/path/to/a.out");
        printf("   message: %s\n", line);
        check(strstr(line, "/path/to/a.out") != NULL, "the message names the image");
        check(strstr(line, "debug") != NULL, "the message says debug information is missing");
    }
    const char *why = p_mqs_dll_error_string(rc);
    check(why != NULL && *why, "the failure code has a text");

    /* A process of that image: the DLL must refuse it cleanly. */
    struct process process = {0, &image};
    rc = p_mqs_setup_process((mqs_process *)&process, &process_cbs);
    if (rc == mqs_ok) {
        message = NULL;
        rc = p_mqs_process_has_queues((mqs_process *)&process, &message);
        check(rc != mqs_ok, "process_has_queues fails for an image without queues");
        check(message == NULL || count_percent_s(message) == 1, "its message has one %s at most");
        check(p_mqs_update_communicator_list((mqs_process *)&process) != mqs_ok ||
                  p_mqs_setup_communicator_iterator((mqs_process *)&process) != mqs_ok,
              "no communicators from a process without queues");
        if (process.info)
            p_mqs_destroy_process_info(process.info);
    } else {
        /* Refusing at once is as good: the refusal must carry a text. */
        const char *refusal = p_mqs_dll_error_string(rc);
        check(refusal != NULL && *refusal, "setup_process's refusal has a text");
    }
    if (image.info)
        p_mqs_destroy_image_info(image.info);

    /* MPIR_Ignore_queues: fail silently, no message. */
    struct image quiet = {0, 1, 0};
    check(p_mqs_setup_image((mqs_image *)&quiet, &image_cbs) == mqs_ok, "mqs_setup_image (quiet)");
    message = (char *)"not touched";
    rc = p_mqs_image_has_queues((mqs_image *)&quiet, &message);
    check(rc != mqs_ok && message == NULL, "MPIR_Ignore_queues: failure with a NULL message");
    if (quiet.info)
        p_mqs_destroy_image_info(quiet.info);

#if FOR_MPI2
    if (job.info)
        check(p_mqs_destroy_job_info(job.info) == mqs_ok, "mqs_destroy_job_info");
#endif
    check(frees <= mallocs, "no more frees than mallocs through the callbacks");
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
