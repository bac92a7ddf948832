/*
 * stacks.c: the process mqs-stacks' tests unwind (src/testing/): built at
 * -O0, -O1 and -O2 with -g, it blocks in two threads whose calls and
 * arguments the tests know. The stacks-O*.rec beside it are recordings of
 * it, stopped (`record_test_data` in src/testing/mod.rs makes them again);
 * the comments `call:NAME` mark the lines the tests expect frames at.
 *
 * The main thread: main > outer(3) > middle(5, 11) > inner(42, 7) > pause().
 * Each function uses some arguments after its call, so an optimising
 * compiler keeps them in callee-saved registers that the function it calls
 * saves, and `spare` is used before the call only, so at -O1/-O2 it is
 * gone (optimised out) by then.
 *
 * The second thread: waiter > MPI_Recv(buf, 4, MPI_INT, 3, 99, comm, status) >
 * MPIR_Recv_impl(..., comm_ptr) > read() on a pipe nobody writes, where
 * MPI_Recv and MPIR_Recv_impl stand in for MPICH's: `comm` is an MPICH
 * handle of a communicator in MPIR_Comm_direct, `comm_ptr` points at it.
 *
 * noipa keeps every function as written: not inlined, not cloned for its
 * constant arguments, its callers assuming only the ABI of it.
 */
#include <pthread.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

/* MPICH's communicator object, as far as mqs reads it. */
typedef struct MPIR_Comm {
    int handle;
    int ref_count;
    unsigned short context_id;
    unsigned short recvcontext_id;
} MPIR_Comm;

MPIR_Comm MPIR_Comm_builtin[3];
MPIR_Comm MPIR_Comm_direct[8];

/* MPICH's MPI_INT, and a handle of kind "direct" (2 << 30), object kind
 * communicator (1 << 26), index 3. */
#define MPI_INT 0x4c000405
#define COMM_HANDLE ((int)0x84000003u)
#define COMM_INDEX 3
#define RECV_CONTEXT_ID 0x1e4
/* MPICH's, passed on the stack (the seventh argument). */
#define MPI_STATUS_IGNORE ((void *)1)

static int pipe_fds[2];

NOIPA int inner(int comm, int tag)
{
    int r = pause(); /* call:pause */
    return r < 0 ? comm : tag;
}

NOIPA int middle(int depth, int spare)
{
    if (spare != 11)
        return -1;
    int r = inner(42, 7); /* call:inner */
    return r + depth;
}

NOIPA int outer(int level)
{
    int r = middle(level + 2, 11); /* call:middle */
    return r * level;
}

NOIPA int MPIR_Recv_impl(void *buf, int count, int source, int tag, MPIR_Comm *comm_ptr)
{
    ssize_t n = read(pipe_fds[0], buf, (size_t)count * sizeof(int)); /* call:read */
    comm_ptr->ref_count += (int)n;
    return n < 0 ? source : tag;
}

NOIPA int MPI_Recv(void *buf, int count, int datatype, int source, int tag, int comm,
                   void *status)
{
    if (datatype != MPI_INT || status != MPI_STATUS_IGNORE)
        return -1;
    MPIR_Comm *comm_ptr = &MPIR_Comm_direct[(unsigned)comm & 0x03ffffff];
    int rc = MPIR_Recv_impl(buf, count, source, tag, comm_ptr); /* call:MPIR_Recv_impl */
    return rc + count + source + tag + comm;
}

static void *waiter(void *arg)
{
    int buf[4];
    MPI_Recv(buf, 4, MPI_INT, 3, 99, COMM_HANDLE, MPI_STATUS_IGNORE); /* call:MPI_Recv */
    return arg;
}

int main(void)
{
    MPIR_Comm_direct[COMM_INDEX].handle = COMM_HANDLE;
    MPIR_Comm_direct[COMM_INDEX].ref_count = 1;
    MPIR_Comm_direct[COMM_INDEX].recvcontext_id = RECV_CONTEXT_ID;
    pthread_t thread;
    if (pipe(pipe_fds) != 0 || pthread_create(&thread, 0, waiter, 0) != 0)
        return 1;
    int r = outer(3); /* call:outer */
    return r & 1;
}
