/*
 * stuck_in_kernel.c: a process whose only thread cannot be stopped. It
 * vforks; the parent then waits inside the kernel until the child exits
 * or execs, and a ptrace stop cannot take effect before that. The child
 * prints "READY pid=<parent>" (so the parent is certainly waiting by then)
 * and sleeps until the parent dies.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(void) {
    char line[64];
    int len = snprintf(line, sizeof line, "READY pid=%ld\n", (long)getpid());
    fflush(stdout);
    pid_t child = vfork();
    if (child == 0) {
        /* Only system calls here: the child borrows the parent's memory. */
        syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        syscall(SYS_write, 1, line, (size_t)len);
        struct timespec t = {3600, 0};
        for (;;)
            syscall(SYS_nanosleep, &t, NULL);
    }
    /* Reached only if the child ends somehow. */
    for (;;)
        pause();
}
