/*
 * mpi2dd_starter.c: publishes the MPI-2 debugger interface (MPI2DD, 2007
 * draft) for real MPI ranks that no MPI ships it for.
 *
 *   mpi2dd_starter tables WORLD_PIDS KIDS_PIDS [bad-magic|bad-version]
 *     WORLD_PIDS, KIDS_PIDS: comma-separated pids of a job's world ranks
 *     and of the world it spawned (in rank order; KIDS_PIDS may be "-").
 *     Three processes publish tables, then wait for ever:
 *       A (this process): a metadirectory and starter; its directory
 *         table names D, its metadirectory table names B;
 *       B (a child): a metadirectory whose metadirectory table names A
 *         (a loop) and whose directory table names D again;
 *       D (a child, not the ranks' parent): the directory: a proctable of
 *         the world ("world-1", no spawn descriptor) and the spawned world
 *         ("kids-1", spawned by world-1 rank 0, sequence 0).
 *     Prints "MPI2DD role=A pid=P", then B and D, once all three are set.
 *     bad-magic / bad-version break A's MPI2DD_info that way.
 *
 *   mpi2dd_starter mpir PID0 PID1
 *     Not MPI2DD: an MPIR starter whose MPIR_proctable has every defect
 *     real launchers have shipped, around two real ranks PID0 and PID1:
 *       rank 0: host "localhost", PID0, a relative executable "./queues";
 *       rank 1: host this machine's name, PID1;
 *       rank 2: host "127.0.0.1", pid 0 (not started yet);
 *       rank 3: PID0 again (a duplicate);
 *       rank 4: the pid of a process that has exited;
 *       rank 5: host "node-elsewhere.example", pid 4242 (another node).
 *     Prints "MPIR pid=P" and waits for ever.
 *
 *   mpi2dd_starter launch [abort] -- COMMAND...
 *     A starter: runs COMMAND (an MPI launcher) as a child, passes its
 *     output through, and once every rank printed "READY rank=R pid=P
 *     size=S" becomes a directory of them, sets debug_state START and calls
 *     MPI2DD_breakpoint. With "abort", one second later it sets
 *     abort_string, debug_state ABORT, calls MPI2DD_breakpoint, terminates
 *     the job and exits with status 7; else it exits with the job's status.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct mpi2dd_info {
    unsigned char magic[5], version, variant, debug_state;
    uint32_t debugger_flags, mpi_flags;
    uint64_t dll_name_32, dll_name_64, meta_host_name, meta_executable_name;
    uint64_t abort_string, proctable, directory_table, metadirectory_table;
    int32_t proctable_size, directory_size, metadirectory_size, meta_pid;
    int32_t padding[8];
} __attribute__((packed));

struct mpi2dd_procdesc {
    uint64_t host_name, executable_name, spawn_desc, comm_world_id;
    int32_t pid, rank;
} __attribute__((packed));

struct mpi2dd_spawndesc {
    uint64_t parent_comm_world_id;
    int32_t parent_rank, sequence;
} __attribute__((packed));

struct mpi2dd_directoryentry {
    uint64_t host_name, executable_name;
    int32_t pid;
} __attribute__((packed));

_Static_assert(sizeof(struct mpi2dd_info) == 128, "MPI2DD_INFO is 128 bytes");
_Static_assert(sizeof(struct mpi2dd_procdesc) == 40, "packed PROCDESC");
_Static_assert(sizeof(struct mpi2dd_directoryentry) == 20, "packed DIRECTORYENTRY");

volatile struct mpi2dd_info MPI2DD_info;

__attribute__((noinline)) void MPI2DD_breakpoint(void)
{
    __asm__ volatile("" ::: "memory");
}

#define MAX_PROCS 256
static struct mpi2dd_procdesc proctable[MAX_PROCS];
static struct mpi2dd_spawndesc spawned_by = {0, 0, 0};
static struct mpi2dd_directoryentry directories[2], metadirectories[2];
static char host[] = "localhost";
static char world[] = "world-1";
static char kids[] = "kids-1";
static char exe[4096];
static char abort_text[] = "fixture abort: rank 1 was lost";

static uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }

static void publish(uint32_t mpi_flags)
{
    memcpy((void *)MPI2DD_info.magic, "MPI2\x7f", 5);
    MPI2DD_info.version = 1;
    MPI2DD_info.variant = 1;
    MPI2DD_info.mpi_flags = mpi_flags;
}

static int parse_pids(const char *list, int *pids)
{
    int n = 0;
    if (strcmp(list, "-") == 0)
        return 0;
    for (const char *p = list; *p && n < MAX_PROCS; n++) {
        pids[n] = atoi(p);
        p = strchr(p, ',');
        if (!p)
            return n + 1;
        p++;
    }
    return n;
}

static void add_entry(int i, int pid, int rank, const char *world_id, int spawned)
{
    proctable[i].host_name = addr(host);
    proctable[i].executable_name = addr(exe);
    proctable[i].spawn_desc = spawned ? addr(&spawned_by) : 0;
    proctable[i].comm_world_id = addr(world_id);
    proctable[i].pid = pid;
    proctable[i].rank = rank;
}

static void entry_for(struct mpi2dd_directoryentry *e, pid_t pid)
{
    e->host_name = addr(host);
    e->executable_name = addr(exe);
    e->pid = pid;
}

static int tables(int argc, char **argv)
{
    int world_pids[MAX_PROCS], kid_pids[MAX_PROCS], ready[2];
    if (argc < 4) {
        fprintf(stderr, "usage: mpi2dd_starter tables WORLD_PIDS KIDS_PIDS [bad-magic|bad-version]\n");
        return 2;
    }
    int nw = parse_pids(argv[2], world_pids), nk = parse_pids(argv[3], kid_pids);
    if (readlink("/proc/self/exe", exe, sizeof exe - 1) < 0)
        return 1;
    if (pipe(ready) != 0)
        return 1;
    pid_t a = getpid();
    spawned_by.parent_comm_world_id = addr(world);
    /* D: the directory. */
    pid_t d = fork();
    if (d == 0) {
        for (int i = 0; i < nw; i++)
            add_entry(i, world_pids[i], i, world, 0);
        for (int i = 0; i < nk; i++)
            add_entry(nw + i, kid_pids[i], i, kids, 1);
        MPI2DD_info.proctable = addr(proctable);
        MPI2DD_info.proctable_size = nw + nk;
        publish(0x02);
        (void)write(ready[1], "D", 1);
        for (;;)
            pause();
    }
    /* B: a second metadirectory, naming A back (a loop) and D again. */
    pid_t b = fork();
    if (b == 0) {
        entry_for(&metadirectories[0], a);
        entry_for(&directories[0], d);
        MPI2DD_info.metadirectory_table = addr(metadirectories);
        MPI2DD_info.metadirectory_size = 1;
        MPI2DD_info.directory_table = addr(directories);
        MPI2DD_info.directory_size = 1;
        publish(0x01);
        (void)write(ready[1], "B", 1);
        for (;;)
            pause();
    }
    entry_for(&directories[0], d);
    entry_for(&metadirectories[0], b);
    MPI2DD_info.directory_table = addr(directories);
    MPI2DD_info.directory_size = 1;
    MPI2DD_info.metadirectory_table = addr(metadirectories);
    MPI2DD_info.metadirectory_size = 1;
    publish(0x01 | 0x04);
    if (argc > 4 && strcmp(argv[4], "bad-magic") == 0)
        MPI2DD_info.magic[4] = 'x';
    if (argc > 4 && strcmp(argv[4], "bad-version") == 0)
        MPI2DD_info.version = 2;
    char c;
    for (int i = 0; i < 2; i++)
        if (read(ready[0], &c, 1) != 1)
            return 1;
    printf("MPI2DD role=A pid=%d\nMPI2DD role=B pid=%d\nMPI2DD role=D pid=%d\n", (int)a, (int)b,
           (int)d);
    fflush(stdout);
    /* Ends with its children when the test kills the group. */
    for (;;)
        pause();
}

/* MPIR, as the MPIR Process Acquisition Interface 1.1 declares it. */
typedef struct {
    char *host_name;
    char *executable_name;
    int pid;
} MPIR_PROCDESC;
MPIR_PROCDESC *MPIR_proctable;
int MPIR_proctable_size;
volatile int MPIR_debug_state;
volatile int MPIR_being_debugged;
int MPIR_i_am_starter;
__attribute__((noinline)) void MPIR_Breakpoint(void)
{
    __asm__ volatile("" ::: "memory");
}

static MPIR_PROCDESC defective[6];
static char node[256];

static int mpir(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: mpi2dd_starter mpir PID0 PID1\n");
        return 2;
    }
    static char relative[] = "./queues", local[] = "localhost", loop4[] = "127.0.0.1",
                elsewhere[] = "node-elsewhere.example";
    if (gethostname(node, sizeof node - 1) != 0 ||
        readlink("/proc/self/exe", exe, sizeof exe - 1) < 0)
        return 1;
    /* A pid that no process has any more. */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    waitpid(gone, NULL, 0);
    MPIR_PROCDESC t[6] = {
        {local, relative, atoi(argv[2])}, {node, exe, atoi(argv[3])},
        {loop4, exe, 0},                  {local, exe, atoi(argv[2])},
        {local, exe, (int)gone},          {elsewhere, exe, 4242},
    };
    memcpy(defective, t, sizeof t);
    MPIR_proctable = defective;
    MPIR_proctable_size = 6;
    MPIR_debug_state = 1;
    MPIR_Breakpoint();
    printf("MPIR pid=%d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}

static int launch(int argc, char **argv)
{
    int abort_job = 0, first = 2, out[2], status;
    if (argc > 2 && strcmp(argv[2], "abort") == 0) {
        abort_job = 1;
        first = 3;
    }
    if (first < argc && strcmp(argv[first], "--") == 0)
        first++;
    if (first >= argc) {
        fprintf(stderr, "usage: mpi2dd_starter launch [abort] -- COMMAND...\n");
        return 2;
    }
    if (readlink("/proc/self/exe", exe, sizeof exe - 1) < 0 || pipe(out) != 0)
        return 1;
    publish(0x02 | 0x04 | 0x40);
    pid_t job = fork();
    if (job == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execvp(argv[first], argv + first);
        _exit(127);
    }
    close(out[1]);
    FILE *in = fdopen(out[0], "r");
    char line[512];
    int seen = 0, size = -1;
    while (fgets(line, sizeof line, in)) {
        int rank, pid, s;
        fputs(line, stdout);
        fflush(stdout);
        if (sscanf(line, "READY rank=%d pid=%d size=%d", &rank, &pid, &s) == 3 && rank >= 0 &&
            rank < MAX_PROCS) {
            add_entry(rank, pid, rank, world, 0);
            size = s;
            if (++seen == size)
                break;
        }
    }
    if (seen == size) {
        MPI2DD_info.proctable = addr(proctable);
        MPI2DD_info.proctable_size = size;
        MPI2DD_info.debug_state = 1; /* MPI2DD_DEBUG_START */
        MPI2DD_breakpoint();
    }
    if (abort_job) {
        sleep(1);
        MPI2DD_info.abort_string = addr(abort_text);
        MPI2DD_info.debug_state = 8; /* MPI2DD_DEBUG_ABORT */
        MPI2DD_breakpoint();
        kill(job, SIGTERM);
        waitpid(job, &status, 0);
        return 7;
    }
    while (fgets(line, sizeof line, in)) {
        fputs(line, stdout);
        fflush(stdout);
    }
    if (waitpid(job, &status, 0) != job)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "tables") == 0)
        return tables(argc, argv);
    if (argc > 1 && strcmp(argv[1], "launch") == 0)
        return launch(argc, argv);
    if (argc > 1 && strcmp(argv[1], "mpir") == 0)
        return mpir(argc, argv);
    fprintf(stderr, "usage: mpi2dd_starter tables|mpir|launch ...\n");
    return 2;
}
