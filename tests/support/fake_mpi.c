/*
 * fake_mpi.c: a process that looks like an MPI rank to a debugger but is not
 * one: it defines MPIR_dll_name (set from argv[1], or left empty with no
 * argument) and nothing else. Used to test how mqs-dump handles the DLL a
 * target names: missing, untrusted, incompatible, or one that misbehaves.
 * Prints "READY pid=<pid>" and then waits until killed.
 *
 * Built without MPIR_dll_name at all (-DNO_MPIR) it is a plain process.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef NO_MPIR
char MPIR_dll_name[4096];
#endif

int main(int argc, char **argv)
{
#ifndef NO_MPIR
    if (argc > 1)
        strncpy(MPIR_dll_name, argv[1], sizeof MPIR_dll_name - 1);
#else
    (void)argc;
    (void)argv;
#endif
    printf("READY pid=%d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
