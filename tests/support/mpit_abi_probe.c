/*
 * mpit_abi_probe.c: prints the MPI_T constants of the mpi.h it is compiled
 * against, one "NAME VALUE" per line, for comparing with the tables of
 * host/mqs-cvars/src/abi.rs. A datatype handle prints as the symbol it points
 * to (Open MPI, where MPI_Datatype is a pointer to a global object) or as
 * its number (MPICH, where it is an int). No MPI call is made.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define INT(c) printf("%s %d\n", #c, (int)(c))

static void datatype(const char *name, MPI_Datatype d)
{
    Dl_info info;
    /* A pointer handle names its object; an int one is its number. */
    if (sizeof(d) == sizeof(void *) && dladdr((void *)(uintptr_t)d, &info) &&
        info.dli_sname != NULL && info.dli_saddr == (void *)(uintptr_t)d) {
        printf("%s %s\n", name, info.dli_sname);
    } else {
        printf("%s %lld\n", name, (long long)(intptr_t)d);
    }
}

#define DT(d) datatype(#d, d)

int main(void)
{
    INT(MPI_SUCCESS);
    INT(MPI_THREAD_SINGLE);
    INT(MPI_THREAD_MULTIPLE);
    INT(MPI_T_VERBOSITY_USER_BASIC);
    INT(MPI_T_VERBOSITY_USER_DETAIL);
    INT(MPI_T_VERBOSITY_USER_ALL);
    INT(MPI_T_VERBOSITY_TUNER_BASIC);
    INT(MPI_T_VERBOSITY_TUNER_DETAIL);
    INT(MPI_T_VERBOSITY_TUNER_ALL);
    INT(MPI_T_VERBOSITY_MPIDEV_BASIC);
    INT(MPI_T_VERBOSITY_MPIDEV_DETAIL);
    INT(MPI_T_VERBOSITY_MPIDEV_ALL);
    INT(MPI_T_SCOPE_CONSTANT);
    INT(MPI_T_SCOPE_READONLY);
    INT(MPI_T_SCOPE_LOCAL);
    INT(MPI_T_SCOPE_GROUP);
    INT(MPI_T_SCOPE_GROUP_EQ);
    INT(MPI_T_SCOPE_ALL);
    INT(MPI_T_SCOPE_ALL_EQ);
    INT(MPI_T_BIND_NO_OBJECT);
    INT(MPI_T_BIND_MPI_COMM);
    INT(MPI_T_BIND_MPI_DATATYPE);
    INT(MPI_T_BIND_MPI_ERRHANDLER);
    INT(MPI_T_BIND_MPI_FILE);
    INT(MPI_T_BIND_MPI_GROUP);
    INT(MPI_T_BIND_MPI_OP);
    INT(MPI_T_BIND_MPI_REQUEST);
    INT(MPI_T_BIND_MPI_WIN);
    INT(MPI_T_BIND_MPI_MESSAGE);
    INT(MPI_T_BIND_MPI_INFO);
    INT(MPI_T_ERR_MEMORY);
    INT(MPI_T_ERR_NOT_INITIALIZED);
    INT(MPI_T_ERR_CANNOT_INIT);
    INT(MPI_T_ERR_INVALID_INDEX);
    INT(MPI_T_ERR_INVALID_ITEM);
    INT(MPI_T_ERR_INVALID_HANDLE);
    INT(MPI_T_ERR_OUT_OF_HANDLES);
    INT(MPI_T_ERR_OUT_OF_SESSIONS);
    INT(MPI_T_ERR_INVALID_SESSION);
    INT(MPI_T_ERR_CVAR_SET_NOT_NOW);
    INT(MPI_T_ERR_CVAR_SET_NEVER);
    INT(MPI_T_ERR_PVAR_NO_STARTSTOP);
    INT(MPI_T_ERR_PVAR_NO_WRITE);
    INT(MPI_T_ERR_PVAR_NO_ATOMIC);
    INT(MPI_T_ERR_INVALID);
    INT(MPI_T_ERR_INVALID_NAME);
    printf("MPI_T_ENUM_NULL %lld\n", (long long)(intptr_t)MPI_T_ENUM_NULL);
    printf("MPI_T_CVAR_HANDLE_NULL %lld\n", (long long)(intptr_t)MPI_T_CVAR_HANDLE_NULL);
    DT(MPI_INT);
    DT(MPI_UNSIGNED);
    DT(MPI_UNSIGNED_LONG);
    DT(MPI_UNSIGNED_LONG_LONG);
    DT(MPI_COUNT);
    DT(MPI_CHAR);
    DT(MPI_DOUBLE);
    DT(MPI_LONG);
    DT(MPI_LONG_LONG);
    DT(MPI_C_BOOL);
    DT(MPI_INT32_T);
    DT(MPI_UINT32_T);
    DT(MPI_INT64_T);
    DT(MPI_UINT64_T);
    return 0;
}
