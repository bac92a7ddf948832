/*
 * test_dll.c: a deliberately odd message-queue DLL for testing the host's
 * handling of DLLs. What it does wrong is chosen when it is compiled:
 *   -DCOMPATIBILITY=N   mqs_version_compatibility returns N (default 2)
 *   -DTADDR_WIDTH=N     mqs_dll_taddr_width returns N (default 8)
 *   -DKILL_TARGET       mqs_update_communicator_list kills the target with
 *                       SIGKILL (its pid read from the environment variable
 *                       MQS_TEST_KILL_PID), then keeps reading from it:
 *                       the "process exited during the dump" case.
 *   -DBLOCK_IN_DLL      mqs_update_communicator_list, once it has fetched,
 *                       creates the file $MQS_TEST_BLOCK_DIR/inside and waits
 *                       (at most 120 s) until $MQS_TEST_BLOCK_DIR/release
 *                       exists: the host is then inside the DLL with every
 *                       process stopped, for as long as a test needs.
 *   -DCRASH_IN_DLL      mqs_update_communicator_list, once it has fetched,
 *                       writes through a NULL pointer: the host's process
 *                       dies of SIGSEGV there (a debugger's helper).
 *   -DBAD_ANSWERS       a DLL that misuses the callbacks and corrupts its
 *                       answers: it passes handles that are not the host's
 *                       (and NULL names) to find_type, field_offset, sizeof,
 *                       find_symbol and fetch_data, fetches unmapped memory
 *                       and a negative size; its communicator's name fills
 *                       all 64 bytes without a NUL and its size is -5; its
 *                       sends are 3 operations of status 77 whose first
 *                       extra_text line has no NUL, then an error code
 *                       (4321); its receives fail to set up (1234) and its
 *                       unexpected queue has no information.
 * Otherwise it reports one communicator "test" of size 1 and empty
 * queues, reading one byte of MPIR_dll_name per call to exercise fetch.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include "mpi_interface.h"

#ifndef COMPATIBILITY
#define COMPATIBILITY 2
#endif
#ifndef TADDR_WIDTH
#define TADDR_WIDTH 8
#endif

static const mqs_basic_callbacks *basic;
static const mqs_image_callbacks *image_cb;
static const mqs_process_callbacks *process_cb;
static mqs_taddr_t name_addr;
static int comm_index;

void mqs_setup_basic_callbacks(const mqs_basic_callbacks *cb) { basic = cb; }
char *mqs_version_string(void) { return (char *)"mqs test DLL"; }
int mqs_version_compatibility(void) { return COMPATIBILITY; }
int mqs_dll_taddr_width(void) { return TADDR_WIDTH; }
char *mqs_dll_error_string(int code) { (void)code; return (char *)"test DLL error"; }

int mqs_setup_image(mqs_image *image, const mqs_image_callbacks *cb)
{
    (void)image;
    image_cb = cb;
    return mqs_ok;
}

int mqs_image_has_queues(mqs_image *image, char **message)
{
    *message = NULL;
#ifdef BAD_ANSWERS
    {
        /* Handles the host never gave, and NULL names: each must be refused. */
        mqs_image *bogus_image = (mqs_image *)0x1234;
        mqs_type *bogus_type = (mqs_type *)image;
        mqs_taddr_t addr;
        if (image_cb->mqs_find_type_fp(bogus_image, (char *)"int", mqs_lang_c) != NULL)
            return mqs_first_user_code + 10;
        if (image_cb->mqs_field_offset_fp(bogus_type, (char *)"x") != -1)
            return mqs_first_user_code + 11;
        if (image_cb->mqs_sizeof_fp(bogus_type) != -1)
            return mqs_first_user_code + 12;
        if (image_cb->mqs_find_symbol_fp(image, NULL, &addr) == mqs_ok)
            return mqs_first_user_code + 13;
        if (image_cb->mqs_find_type_fp(image, NULL, mqs_lang_c) != NULL)
            return mqs_first_user_code + 14;
        if (image_cb->mqs_find_function_fp(image, (char *)"mqs_no_such_function", mqs_lang_c,
                                           NULL) == mqs_ok)
            return mqs_first_user_code + 15;
    }
#endif
    if (image_cb->mqs_find_symbol_fp(image, (char *)"MPIR_dll_name", &name_addr) != mqs_ok) {
        *message = (char *)"test DLL: no MPIR_dll_name in %s";
        return mqs_first_user_code;
    }
    return mqs_ok;
}

void mqs_destroy_image_info(mqs_image_info *info) { (void)info; }

int mqs_setup_process(mqs_process *process, const mqs_process_callbacks *cb)
{
    (void)process;
    process_cb = cb;
    return mqs_ok;
}

int mqs_process_has_queues(mqs_process *process, char **message)
{
    (void)process;
    *message = NULL;
    return mqs_ok;
}

void mqs_destroy_process_info(mqs_process_info *info) { (void)info; }

int mqs_update_communicator_list(mqs_process *process)
{
    char byte;
#ifdef KILL_TARGET
    const char *pid = getenv("MQS_TEST_KILL_PID");
    if (pid)
        kill((pid_t)atoi(pid), SIGKILL);
    /* Reads now fail: report it as the DLL would. */
    for (int i = 0; i < 100; i++)
        if (process_cb->mqs_fetch_data_fp(process, name_addr, 1, &byte) != mqs_ok)
            return mqs_first_user_code + 1;
#endif
    if (process_cb->mqs_fetch_data_fp(process, name_addr, 1, &byte) != mqs_ok)
        return mqs_first_user_code + 1;
#ifdef CRASH_IN_DLL
    *(volatile int *)0 = 1;
#endif
#ifdef BAD_ANSWERS
    {
        char buf[16];
        if (process_cb->mqs_fetch_data_fp((mqs_process *)0x1234, name_addr, 1, buf) == mqs_ok)
            return mqs_first_user_code + 20;
        if (process_cb->mqs_fetch_data_fp(process, 8, (int)sizeof buf, buf) == mqs_ok)
            return mqs_first_user_code + 21;
        if (process_cb->mqs_fetch_data_fp(process, name_addr, -1, buf) == mqs_ok)
            return mqs_first_user_code + 22;
    }
#endif
#ifdef BLOCK_IN_DLL
    const char *dir = getenv("MQS_TEST_BLOCK_DIR");
    if (dir) {
        char inside[4096], release[4096];
        snprintf(inside, sizeof inside, "%s/inside", dir);
        snprintf(release, sizeof release, "%s/release", dir);
        int fd = open(inside, O_CREAT | O_WRONLY, 0644);
        if (fd >= 0)
            close(fd);
        struct timespec nap = {0, 10 * 1000 * 1000};
        for (int i = 0; i < 12000 && access(release, F_OK) != 0; i++)
            nanosleep(&nap, NULL);
    }
#endif
    return mqs_ok;
}

int mqs_setup_communicator_iterator(mqs_process *process)
{
    (void)process;
    comm_index = 0;
    return mqs_ok;
}

int mqs_get_communicator(mqs_process *process, mqs_communicator *comm)
{
    (void)process;
    if (comm_index != 0)
        return mqs_end_of_list;
    comm->unique_id = 7;
    comm->local_rank = 0;
    comm->size = 1;
    comm->name[0] = 't'; comm->name[1] = 'e'; comm->name[2] = 's'; comm->name[3] = 't';
    comm->name[4] = 0;
#ifdef BAD_ANSWERS
    memset(comm->name, 'n', sizeof comm->name);
    comm->size = -5;
#endif
    return mqs_ok;
}

int mqs_next_communicator(mqs_process *process)
{
    (void)process;
    comm_index++;
    return mqs_end_of_list;
}

#ifdef BAD_ANSWERS
static int op_index;
#endif

int mqs_setup_operation_iterator(mqs_process *process, int op)
{
    (void)process;
#ifdef BAD_ANSWERS
    op_index = 0;
    if (op == mqs_pending_receives)
        return 1234;
    if (op == mqs_unexpected_messages)
        return mqs_no_information;
    return mqs_ok;
#else
    (void)op;
    return mqs_end_of_list;
#endif
}

int mqs_next_operation(mqs_process *process, mqs_pending_operation *op)
{
    (void)process;
#ifdef BAD_ANSWERS
    if (op_index == 3)
        return 4321;
    op->status = 77;
    op->desired_local_rank = op_index;
    op->desired_global_rank = -7;
    op->desired_tag = 100 + op_index;
    op->desired_length = 8;
    op->buffer = 0x1000;
    memset(op->extra_text[0], 'x', sizeof op->extra_text[0]);
    op_index++;
    return mqs_ok;
#else
    (void)op;
    return mqs_end_of_list;
#endif
}
