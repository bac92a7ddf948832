/*
 * strict_host.c: a debugger for message-queue DLLs that behaves like the
 * debuggers we know (padb's minfo driving gdb, in particular) rather than
 * like mqs-dump, to catch a DLL that relies on a forgiving host:
 *
 *  - its image and process objects, and every structure it hands the DLL
 *    to fill, start out filled with a garbage pattern (0xa0 bytes: as a
 *    pointer, aligned and pointing nowhere); get_*_info answer that garbage
 *    until the DLL has put its info there (padb keeps them on the stack,
 *    uninitialised);
 *  - memory is fetched in pieces of at most 256 bytes, as padb asks gdb for
 *    it, and address 0 is refused;
 *  - types are found by typedef name only: no struct tags, and a name with
 *    a space in it is refused (padb splits its requests to gdb on spaces);
 *  - get_global_rank answers -1 (padb calls the DLL before it knows it);
 *  - mqs_end_of_list from a setup_*_iterator call is counted as a failure
 *    (padb prints "Setup operation iterator failed" and gives up);
 *  - the queues are asked for in padb's order: receives, unexpected, sends;
 *  - no mqs_destroy_* call, no dlclose;
 *  - every callback is counted, by kind.
 *
 * Usage:
 *   strict_host [-v] DLL DESCRIPTION   one session; prints what the DLL
 *                                      listed, the callback counts and a
 *                                      verdict; exit 0 only if it passed
 *   strict_host [-v] DLL --serve       sessions read from stdin (fuzzing),
 *                                      one "result" line printed for each
 *
 * A description is a text file, one item per line:
 *   sizes SHORT INT LONG LONGLONG POINTER   what get_type_sizes answers
 *   symbol NAME ADDR                        find_symbol and find_function
 *   type NAME SIZE                          a typedef name and its sizeof
 *   field NAME OFFSET                       a member of the last type
 *   memory ADDR HEX                         target bytes (snapshots)
 *   pid PID                                 read a live, stopped process
 *                                           through /proc/PID/mem
 * Addresses are decimal or 0x-prefixed hexadecimal.
 *
 * --serve commands (one per line on stdin):
 *   load FILE                 read a description as base 0, 1, ...
 *   session N                 start a session from a copy of base N
 *   write ADDR HEX            patch the session's memory (mapping pages)
 *   unmap ADDR                unmap the 4 KiB page holding ADDR
 *   typesize NAME SIZE        change a type's size
 *   field TYPE NAME OFFSET    change (or add) a member's offset
 *   run                       run the session: one line "result ..."
 *   run full                  the same, after what the DLL listed, the
 *                             callback counts and the names not found
 *   quit
 *
 * Compiled against include/mpi_interface.h (-DFOR_MPI2=1 for the MPI-2
 * interface), C11 with POSIX.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_interface.h"

#define PAGE 4096u
#define PIECE 256 /* bytes per read, as padb asks gdb */
#define GARBAGE 0xa0
#define MAX_ITEMS (1 << 20) /* communicators or operations: more is a loop */
#define MAX_NAMES 64        /* missing names remembered */

static int verbose;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "strict_host: out of memory\n");
        exit(3);
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "strict_host: out of memory\n");
        exit(3);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

/* ---- the target: memory, symbols, types --------------------------------- */

struct page {
    uint64_t addr;
    unsigned char *bytes;
    int shared; /* bytes belong to a base: copy before writing */
};

struct field {
    char *name;
    long offset;
};

struct type {
    char *name;
    long size;
    struct field *fields;
    size_t nfields;
};

struct symbol {
    char *name;
    uint64_t addr;
};

struct target {
    int sizes[5];
    struct symbol *symbols;
    size_t nsymbols;
    struct type *types;
    size_t ntypes;
    struct page *pages; /* sorted by address */
    size_t npages;
    int mem_fd; /* /proc/PID/mem of a live process, or -1 */
};

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static size_t find_page(const struct target *t, uint64_t page_addr, int *found)
{
    size_t lo = 0, hi = t->npages;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->pages[mid].addr < page_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < t->npages && t->pages[lo].addr == page_addr;
    return lo;
}

/* The page holding addr, mapped (zero-filled) if it was not. */
static unsigned char *map_page(struct target *t, uint64_t addr)
{
    uint64_t base = addr - addr % PAGE;
    int found;
    size_t i = find_page(t, base, &found);
    if (found) {
        struct page *p = &t->pages[i];
        if (p->shared) {
            unsigned char *own = xmalloc(PAGE);
            memcpy(own, p->bytes, PAGE);
            p->bytes = own;
            p->shared = 0;
        }
        return p->bytes;
    }
    t->pages = xrealloc(t->pages, (t->npages + 1) * sizeof *t->pages);
    memmove(&t->pages[i + 1], &t->pages[i], (t->npages - i) * sizeof *t->pages);
    t->pages[i].addr = base;
    t->pages[i].bytes = xmalloc(PAGE);
    t->pages[i].shared = 0;
    memset(t->pages[i].bytes, 0, PAGE);
    t->npages++;
    return t->pages[i].bytes;
}

static void unmap_page(struct target *t, uint64_t addr)
{
    int found;
    size_t i = find_page(t, addr - addr % PAGE, &found);
    if (!found)
        return;
    if (!t->pages[i].shared)
        free(t->pages[i].bytes);
    memmove(&t->pages[i], &t->pages[i + 1], (t->npages - i - 1) * sizeof *t->pages);
    t->npages--;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int write_hex(struct target *t, uint64_t addr, const char *hex)
{
    size_t n = strlen(hex);
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        uint64_t a = addr + i / 2;
        map_page(t, a)[a % PAGE] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* Reads one piece of at most PIECE bytes; 0 when every byte was read. */
static int read_piece(const struct target *t, uint64_t addr, size_t n, unsigned char *out)
{
    if (t->mem_fd >= 0) {
        ssize_t got = pread(t->mem_fd, out, n, (off_t)addr);
        return got == (ssize_t)n ? 0 : -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t a = addr + i;
        if (a < addr)
            return -1;
        int found;
        size_t p = find_page(t, a - a % PAGE, &found);
        if (!found)
            return -1;
        out[i] = t->pages[p].bytes[a % PAGE];
    }
    return 0;
}

static struct type *find_type_named(struct target *t, const char *name)
{
    for (size_t i = 0; i < t->ntypes; i++)
        if (strcmp(t->types[i].name, name) == 0)
            return &t->types[i];
    return NULL;
}

static struct field *find_field(struct type *ty, const char *name)
{
    for (size_t i = 0; i < ty->nfields; i++)
        if (strcmp(ty->fields[i].name, name) == 0)
            return &ty->fields[i];
    return NULL;
}

static void add_field(struct type *ty, const char *name, long offset)
{
    ty->fields = xrealloc(ty->fields, (ty->nfields + 1) * sizeof *ty->fields);
    ty->fields[ty->nfields].name = xstrdup(name);
    ty->fields[ty->nfields].offset = offset;
    ty->nfields++;
}

/* Splits a line into at most max words (the last one takes the rest). */
static int split(char *line, char **words, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '\n')
            break;
        words[n++] = p;
        if (n == max) {
            p[strcspn(p, "\n")] = 0;
            break;
        }
        p += strcspn(p, " \t\n");
        if (*p)
            *p++ = 0;
    }
    return n;
}

static int load_description(const char *path, struct target *t)
{
    memset(t, 0, sizeof *t);
    t->mem_fd = -1;
    int def[5] = {2, 4, 8, 8, 8};
    memcpy(t->sizes, def, sizeof def);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "strict_host: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, bad = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        char *w[6];
        int n = split(line, w, 6);
        if (n == 0 || w[0][0] == '#')
            continue;
        uint64_t a;
        long v;
        if (strcmp(w[0], "sizes") == 0 && n == 6) {
            for (int i = 0; i < 5; i++) {
                if (parse_long(w[i + 1], &v))
                    bad = 1;
                t->sizes[i] = (int)v;
            }
        } else if (strcmp(w[0], "symbol") == 0 && n == 3 && !parse_u64(w[2], &a)) {
            t->symbols = xrealloc(t->symbols, (t->nsymbols + 1) * sizeof *t->symbols);
            t->symbols[t->nsymbols].name = xstrdup(w[1]);
            t->symbols[t->nsymbols].addr = a;
            t->nsymbols++;
        } else if (strcmp(w[0], "type") == 0 && n == 3 && !parse_long(w[2], &v)) {
            t->types = xrealloc(t->types, (t->ntypes + 1) * sizeof *t->types);
            struct type *ty = &t->types[t->ntypes++];
            memset(ty, 0, sizeof *ty);
            ty->name = xstrdup(w[1]);
            ty->size = v;
        } else if (strcmp(w[0], "field") == 0 && n == 3 && t->ntypes > 0 &&
                   !parse_long(w[2], &v)) {
            add_field(&t->types[t->ntypes - 1], w[1], v);
        } else if (strcmp(w[0], "memory") == 0 && n == 3 && !parse_u64(w[1], &a)) {
            if (write_hex(t, a, w[2]))
                bad = 1;
        } else if (strcmp(w[0], "pid") == 0 && n == 2 && !parse_long(w[1], &v)) {
            char mem[64];
            snprintf(mem, sizeof mem, "/proc/%ld/mem", v);
            t->mem_fd = open(mem, O_RDONLY | O_CLOEXEC);
            if (t->mem_fd < 0) {
                fprintf(stderr, "strict_host: %s: %s\n", mem, strerror(errno));
                bad = 1;
            }
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "strict_host: %s:%d: cannot read this line\n", path, lineno);
            break;
        }
    }
    free(line);
    fclose(f);
    return bad ? -1 : 0;
}

/* A session's private copy of a base: memory and types may be changed.
 * Pages are shared with the base until written (copy on write); names
 * are the base's, offsets and sizes the copy's own. */
static void copy_target(const struct target *from, struct target *to)
{
    *to = *from;
    to->types = xmalloc(from->ntypes * sizeof *to->types);
    for (size_t i = 0; i < from->ntypes; i++) {
        to->types[i] = from->types[i];
        to->types[i].fields = xmalloc(from->types[i].nfields * sizeof(struct field));
        memcpy(to->types[i].fields, from->types[i].fields,
               from->types[i].nfields * sizeof(struct field));
    }
    to->pages = xmalloc(from->npages * sizeof *to->pages);
    for (size_t i = 0; i < from->npages; i++) {
        to->pages[i] = from->pages[i];
        to->pages[i].shared = 1;
    }
}

static void free_copy(struct target *t, const struct target *base)
{
    for (size_t i = 0; i < t->ntypes; i++) {
        /* Fields added to the copy (not in the base) own their names. */
        size_t ours = i < base->ntypes ? base->types[i].nfields : 0;
        for (size_t k = ours; k < t->types[i].nfields; k++)
            free(t->types[i].fields[k].name);
        free(t->types[i].fields);
    }
    free(t->types);
    for (size_t i = 0; i < t->npages; i++)
        if (!t->pages[i].shared)
            free(t->pages[i].bytes);
    free(t->pages);
    memset(t, 0, sizeof *t);
}

/* ---- callback counting ---------------------------------------------------- */

enum kind {
    K_MALLOC, K_FREE, K_DPRINTS, K_ERRORSTRING,
    K_PUT_IMAGE_INFO, K_GET_IMAGE_INFO, K_PUT_PROCESS_INFO, K_GET_PROCESS_INFO,
    K_PUT_JOB_INFO, K_GET_JOB_INFO,
    K_GET_TYPE_SIZES, K_FIND_FUNCTION, K_FIND_SYMBOL, K_FIND_TYPE, K_FIELD_OFFSET, K_SIZEOF,
    K_GET_GLOBAL_RANK, K_GET_IMAGE, K_FETCH, K_TARGET_TO_HOST,
    K_GET_PROCESS_JOB, K_GET_PROCESS_IDENTITY, K_GET_PROCESS,
    K_COUNT
};

static const char *const kind_names[K_COUNT] = {
    "malloc", "free", "dprints", "errorstring",
    "put_image_info", "get_image_info", "put_process_info", "get_process_info",
    "put_job_info", "get_job_info",
    "get_type_sizes", "find_function", "find_symbol", "find_type", "field_offset", "sizeof",
    "get_global_rank", "get_image", "fetch", "target_to_host",
    "get_process_job", "get_process_identity", "get_process",
};

/* What one session saw. */
static struct stats {
    unsigned long calls[K_COUNT];
    unsigned long pieces;        /* 256-byte reads behind the fetches */
    unsigned long refused_types; /* names with a space */
    unsigned long setup_eol;     /* mqs_end_of_list from a setup call */
    unsigned long comm_eol;      /* ... from setup_communicator_iterator */
    unsigned long unwritten;     /* out-structures the DLL left (partly) garbage */
    unsigned long endless;       /* iterations stopped at MAX_ITEMS */
    unsigned long comms, ops;
    int codes[32]; /* distinct codes other than ok, no_information, end_of_list */
    int ncodes;
    char *missing[MAX_NAMES]; /* names asked for and not found */
    int nmissing;
} st;

static void count(enum kind k) { st.calls[k]++; }

static void note_code(int rc)
{
    if (rc == mqs_ok || rc == mqs_no_information || rc == mqs_end_of_list)
        return;
    for (int i = 0; i < st.ncodes; i++)
        if (st.codes[i] == rc)
            return;
    if (st.ncodes < (int)(sizeof st.codes / sizeof st.codes[0]))
        st.codes[st.ncodes++] = rc;
}

static void note_missing(const char *what, const char *name)
{
    char buf[300];
    snprintf(buf, sizeof buf, "%s:%s", what, name);
    for (int i = 0; i < st.nmissing; i++)
        if (strcmp(st.missing[i], buf) == 0)
            return;
    if (st.nmissing < MAX_NAMES)
        st.missing[st.nmissing++] = xstrdup(buf);
}

static void reset_stats(void)
{
    for (int i = 0; i < st.nmissing; i++)
        free(st.missing[i]);
    memset(&st, 0, sizeof st);
}

/* ---- the debugger's objects and callbacks --------------------------------- */

struct image {
    mqs_image_info *info; /* garbage until the DLL puts its info */
    struct target *target;
};
struct process {
    mqs_process_info *info;
    struct image *image;
#if FOR_MPI2
    struct job *job;
#endif
};
#if FOR_MPI2
struct job {
    mqs_job_info *info;
};
#endif

/* A fresh object: garbage everywhere, as on an uninitialised stack. */
static void *garbage_object(size_t n)
{
    void *p = xmalloc(n);
    memset(p, GARBAGE, n);
    return p;
}

static void *cb_malloc(size_t n) { count(K_MALLOC); return malloc(n); }
static void cb_free(void *p) { count(K_FREE); free(p); }
static void cb_dprints(const char *s)
{
    count(K_DPRINTS);
    if (verbose && s)
        fprintf(stderr, "dll: %s", s);
}
static char *cb_errorstring(int code)
{
    (void)code;
    count(K_ERRORSTRING);
    return (char *)"strict host error";
}
static void cb_put_image_info(mqs_image *i, mqs_image_info *info)
{
    count(K_PUT_IMAGE_INFO);
    ((struct image *)i)->info = info;
}
static mqs_image_info *cb_get_image_info(mqs_image *i)
{
    count(K_GET_IMAGE_INFO);
    return ((struct image *)i)->info;
}
static void cb_put_process_info(mqs_process *p, mqs_process_info *info)
{
    count(K_PUT_PROCESS_INFO);
    ((struct process *)p)->info = info;
}
static mqs_process_info *cb_get_process_info(mqs_process *p)
{
    count(K_GET_PROCESS_INFO);
    return ((struct process *)p)->info;
}
#if FOR_MPI2
static void cb_put_job_info(mqs_job *j, mqs_job_info *info)
{
    count(K_PUT_JOB_INFO);
    ((struct job *)j)->info = info;
}
static mqs_job_info *cb_get_job_info(mqs_job *j)
{
    count(K_GET_JOB_INFO);
    return ((struct job *)j)->info;
}
static mqs_process *cb_get_process(mqs_job *j, int id)
{
    (void)j; (void)id;
    count(K_GET_PROCESS);
    return NULL;
}
#endif

static void cb_get_type_sizes(mqs_process *p, mqs_target_type_sizes *s)
{
    count(K_GET_TYPE_SIZES);
    const int *z = ((struct process *)p)->image->target->sizes;
    s->short_size = z[0];
    s->int_size = z[1];
    s->long_size = z[2];
    s->long_long_size = z[3];
    s->pointer_size = z[4];
}

static int lookup_symbol(mqs_image *i, const char *what, char *name, mqs_taddr_t *addr)
{
    struct target *t = ((struct image *)i)->target;
    for (size_t k = 0; k < t->nsymbols; k++) {
        if (strcmp(t->symbols[k].name, name) == 0) {
            if (addr)
                *addr = t->symbols[k].addr;
            return mqs_ok;
        }
    }
    note_missing(what, name);
    return mqs_no_information;
}

static int cb_find_function(mqs_image *i, char *name, mqs_lang_code lang, mqs_taddr_t *addr)
{
    (void)lang;
    count(K_FIND_FUNCTION);
    return lookup_symbol(i, "function", name, addr);
}

static int cb_find_symbol(mqs_image *i, char *name, mqs_taddr_t *addr)
{
    count(K_FIND_SYMBOL);
    return lookup_symbol(i, "symbol", name, addr);
}

static mqs_type *cb_find_type(mqs_image *i, char *name, mqs_lang_code lang)
{
    (void)lang;
    count(K_FIND_TYPE);
    if (strchr(name, ' ')) {
        st.refused_types++;
        note_missing("type", name);
        return NULL;
    }
    struct type *ty = find_type_named(((struct image *)i)->target, name);
    if (!ty)
        note_missing("type", name);
    return (mqs_type *)ty;
}

static int cb_field_offset(mqs_type *t, char *name)
{
    count(K_FIELD_OFFSET);
    struct field *f = find_field((struct type *)t, name);
    return f ? (int)f->offset : -1;
}

static int cb_sizeof(mqs_type *t)
{
    count(K_SIZEOF);
    return (int)((struct type *)t)->size;
}

static int cb_get_global_rank(mqs_process *p)
{
    (void)p;
    count(K_GET_GLOBAL_RANK);
    return -1;
}

static mqs_image *cb_get_image(mqs_process *p)
{
    count(K_GET_IMAGE);
    return (mqs_image *)((struct process *)p)->image;
}

static int cb_fetch_data(mqs_process *p, mqs_taddr_t addr, int size, void *buf)
{
    count(K_FETCH);
    if (addr == 0 || size < 0)
        return mqs_no_information;
    const struct target *t = ((struct process *)p)->image->target;
    unsigned char *out = buf;
    while (size > 0) {
        int n = size < PIECE ? size : PIECE;
        st.pieces++;
        if (read_piece(t, addr, (size_t)n, out))
            return mqs_no_information;
        addr += (mqs_taddr_t)n;
        out += n;
        size -= n;
    }
    return mqs_ok;
}

static void cb_target_to_host(mqs_process *p, const void *in, void *out, int n)
{
    (void)p;
    count(K_TARGET_TO_HOST);
    if (n > 0)
        memcpy(out, in, (size_t)n);
}

#if FOR_MPI2
static mqs_job *cb_get_process_job(mqs_process *p)
{
    count(K_GET_PROCESS_JOB);
    return (mqs_job *)((struct process *)p)->job;
}
static int cb_get_process_identity(mqs_job *p)
{
    (void)p;
    count(K_GET_PROCESS_IDENTITY);
    return MQS_INVALID_PROCESS;
}
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

/* ---- the DLL -------------------------------------------------------------- */

/* Entry points, each a pointer of the header's own prototype type. */
static struct {
    __typeof__(&mqs_dll_error_string) dll_error_string;
    __typeof__(&mqs_setup_basic_callbacks) setup_basic_callbacks;
    __typeof__(&mqs_setup_image) setup_image;
    __typeof__(&mqs_image_has_queues) image_has_queues;
    __typeof__(&mqs_setup_process) setup_process;
    __typeof__(&mqs_process_has_queues) process_has_queues;
    __typeof__(&mqs_update_communicator_list) update_communicator_list;
    __typeof__(&mqs_setup_communicator_iterator) setup_communicator_iterator;
    __typeof__(&mqs_get_communicator) get_communicator;
    __typeof__(&mqs_get_comm_group) get_comm_group;
    __typeof__(&mqs_get_comm_cartesian) get_comm_cartesian;
    __typeof__(&mqs_next_communicator) next_communicator;
    __typeof__(&mqs_setup_operation_iterator) setup_operation_iterator;
    __typeof__(&mqs_next_operation) next_operation;
#if FOR_MPI2
    __typeof__(&mqs_setup_job) setup_job;
#endif
} dll;

/* dlsym into a function pointer without type punning. */
#define LOOKUP(h, f)                                \
    do {                                            \
        void *sym_ = dlsym(h, "mqs_" #f);           \
        memcpy(&dll.f, &sym_, sizeof sym_);         \
    } while (0)

static int load_dll(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "strict_host: %s\n", dlerror());
        return -1;
    }
#define NEED(f)                                                          \
    do {                                                                 \
        LOOKUP(h, f);                                                    \
        if (!dll.f) {                                                    \
            fprintf(stderr, "strict_host: %s lacks mqs_" #f "\n", path); \
            return -1;                                                   \
        }                                                                \
    } while (0)
    NEED(dll_error_string);
    NEED(setup_basic_callbacks);
    NEED(setup_image);
    NEED(image_has_queues);
    NEED(setup_process);
    NEED(process_has_queues);
    NEED(update_communicator_list);
    NEED(setup_communicator_iterator);
    NEED(get_communicator);
    NEED(next_communicator);
    NEED(setup_operation_iterator);
    NEED(next_operation);
#if FOR_MPI2
    NEED(setup_job);
#endif
#undef NEED
    /* Optional, as for padb. */
    LOOKUP(h, get_comm_group);
    /* mqs's own extension: only our DLL has it. */
    LOOKUP(h, get_comm_cartesian);
    return 0;
}

/* ---- one session ---------------------------------------------------------- */

/* Whether a fixed-size C string the DLL wrote ends within its array. */
static int terminated(const char *s, size_t n) { return memchr(s, 0, n) != NULL; }

static const char *const class_names[3] = {"sends", "receives", "unexpected"};

static void print_quoted(FILE *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '\\')
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
}

static void queue(mqs_process *p, int class, FILE *out)
{
    int rc = dll.setup_operation_iterator(p, class);
    if (out)
        fprintf(out, "queue %s %d\n", class_names[class], rc);
    note_code(rc);
    if (rc == mqs_end_of_list)
        st.setup_eol++;
    if (rc != mqs_ok)
        return;
    for (unsigned long n = 0;; n++) {
        if (n >= MAX_ITEMS) {
            st.endless++;
            return;
        }
        mqs_pending_operation op;
        memset(&op, GARBAGE, sizeof op);
        rc = dll.next_operation(p, &op);
        if (rc != mqs_ok) {
            note_code(rc);
            if (out)
                fprintf(out, "end %d\n", rc);
            return;
        }
        st.ops++;
        int lines_ok = 1;
        for (int i = 0; i < 5; i++)
            lines_ok &= terminated(op.extra_text[i], sizeof op.extra_text[i]);
        if (!lines_ok || op.status < 0 || op.status > 2 || (op.tag_wild != 0 && op.tag_wild != 1) ||
            (op.system_buffer != 0 && op.system_buffer != 1))
            st.unwritten++;
        if (!out)
            continue;
        fprintf(out,
                "op %d %" PRId64 " %" PRId64 " %d %" PRId64 " %" PRId64 " %d 0x%" PRIx64 " %" PRId64
                " %" PRId64 " %" PRId64 " %" PRId64 "\n",
                op.status, (int64_t)op.desired_local_rank, (int64_t)op.desired_global_rank,
                op.tag_wild, (int64_t)op.desired_tag, (int64_t)op.desired_length,
                op.system_buffer, (uint64_t)op.buffer, (int64_t)op.actual_local_rank,
                (int64_t)op.actual_global_rank, (int64_t)op.actual_tag,
                (int64_t)op.actual_length);
        for (int i = 0; i < 5 && lines_ok && op.extra_text[i][0]; i++) {
            fputs("text ", out);
            print_quoted(out, op.extra_text[i], sizeof op.extra_text[i]);
            fputc('\n', out);
        }
    }
}

/* The calling sequence of padb's minfo, stricter. Returns 0 when the DLL
 * showed its queues without a failure. */
static int session(struct target *t, FILE *out)
{
    int failed = 0;
    dll.setup_basic_callbacks(&basic);
#if FOR_MPI2
    struct job *job = garbage_object(sizeof *job);
    int jrc = dll.setup_job((mqs_job *)job, &job_cbs);
    note_code(jrc);
    if (out)
        fprintf(out, "setup_job %d\n", jrc);
    failed |= jrc != mqs_ok;
#endif
    struct image *image = garbage_object(sizeof *image);
    image->target = t;
    struct process *process = garbage_object(sizeof *process);
    process->image = image;
#if FOR_MPI2
    process->job = job;
#endif
    mqs_image *ih = (mqs_image *)image;
    mqs_process *ph = (mqs_process *)process;

    int rc = dll.setup_image(ih, &image_cbs);
    note_code(rc);
    if (out)
        fprintf(out, "setup_image %d\n", rc);
    if (rc != mqs_ok) {
        failed = 1;
        goto done;
    }
    char *message = NULL;
    rc = dll.image_has_queues(ih, &message);
    note_code(rc);
    if (out) {
        fprintf(out, "image_has_queues %d", rc);
        if (message)
            fprintf(out, " %s", message);
        fputc('\n', out);
    }
    if (rc != mqs_ok) {
        failed = 1;
        goto done;
    }
    rc = dll.setup_process(ph, &process_cbs);
    note_code(rc);
    if (out)
        fprintf(out, "setup_process %d\n", rc);
    if (rc != mqs_ok) {
        failed = 1;
        goto done;
    }
    message = NULL;
    rc = dll.process_has_queues(ph, &message);
    note_code(rc);
    if (out) {
        fprintf(out, "process_has_queues %d", rc);
        if (message)
            fprintf(out, " %s", message);
        fputc('\n', out);
    }
    if (rc != mqs_ok) {
        failed = 1;
        goto done;
    }
    rc = dll.update_communicator_list(ph);
    note_code(rc);
    if (out)
        fprintf(out, "update %d\n", rc);
    rc = dll.setup_communicator_iterator(ph);
    note_code(rc);
    if (out)
        fprintf(out, "setup_communicator_iterator %d\n", rc);
    if (rc == mqs_end_of_list)
        st.comm_eol++;
    if (rc != mqs_ok) {
        failed = 1;
        goto done;
    }
    for (;;) {
        if (st.comms >= MAX_ITEMS) {
            st.endless++;
            break;
        }
        mqs_communicator comm;
        memset(&comm, GARBAGE, sizeof comm);
        rc = dll.get_communicator(ph, &comm);
        note_code(rc);
        if (rc != mqs_ok) {
            failed = 1;
            if (out)
                fprintf(out, "get_communicator %d\n", rc);
            break;
        }
        st.comms++;
        if (!terminated(comm.name, sizeof comm.name))
            st.unwritten++;
        if (out) {
            fprintf(out, "comm %" PRIu64 " %" PRId64 " %" PRId64 " ", (uint64_t)comm.unique_id,
                    (int64_t)comm.local_rank, (int64_t)comm.size);
            print_quoted(out, comm.name, sizeof comm.name);
            fputc('\n', out);
        }
        if (dll.get_comm_group && comm.size > 0 && comm.size <= MAX_ITEMS) {
            size_t n = (size_t)comm.size;
            int *ranks = garbage_object(n * sizeof *ranks);
            rc = dll.get_comm_group(ph, ranks);
            note_code(rc);
            if (rc == mqs_ok) {
                int garbage;
                memset(&garbage, GARBAGE, sizeof garbage);
                for (size_t i = 0; i < n; i++)
                    if (ranks[i] == garbage) {
                        st.unwritten++;
                        break;
                    }
                if (out) {
                    fputs("group", out);
                    for (size_t i = 0; i < n; i++)
                        fprintf(out, " %d", ranks[i]);
                    fputc('\n', out);
                }
            } else if (out) {
                fprintf(out, "group error %d\n", rc);
            }
            free(ranks);
        }
        if (dll.get_comm_cartesian) {
            enum { MAX_DIMS = 16 };
            int ndims = -1;
            int *dims = garbage_object(MAX_DIMS * sizeof *dims);
            int *periods = garbage_object(MAX_DIMS * sizeof *periods);
            rc = dll.get_comm_cartesian(ph, MAX_DIMS, &ndims, dims, periods);
            note_code(rc);
            if (rc == mqs_ok && (ndims < 1 || ndims > MAX_DIMS))
                st.unwritten++;
            else if (rc == mqs_ok && out) {
                fputs("cartesian", out);
                for (int i = 0; i < ndims; i++)
                    fprintf(out, " %d%s", dims[i], periods[i] ? "p" : "");
                fputc('\n', out);
            }
            free(dims);
            free(periods);
        }
        queue(ph, mqs_pending_receives, out);
        queue(ph, mqs_unexpected_messages, out);
        queue(ph, mqs_pending_sends, out);
        rc = dll.next_communicator(ph);
        if (rc != mqs_ok) {
            note_code(rc);
            if (out)
                fprintf(out, "next_communicator %d\n", rc);
            if (rc != mqs_end_of_list)
                failed = 1;
            break;
        }
    }
done:
    /* Like padb: nothing is destroyed. The DLL's info stays reachable
     * through these objects, which are only freed by exit. */
    if (st.setup_eol || st.comm_eol || st.unwritten || st.endless || st.ncodes)
        failed = 1;
    return failed;
}

static void print_counts(FILE *out)
{
    fputs("counts", out);
    for (int k = 0; k < K_COUNT; k++)
        fprintf(out, " %s=%lu", kind_names[k], st.calls[k]);
    fprintf(out, " pieces=%lu refused_types=%lu\n", st.pieces, st.refused_types);
}

static void print_details(FILE *out)
{
    print_counts(out);
    for (int i = 0; i < st.nmissing; i++)
        fprintf(out, "missing %s\n", st.missing[i]);
}

static void print_result(FILE *out, int failed)
{
    fprintf(out,
            "result failed=%d comms=%lu ops=%lu setup_eol=%lu comm_eol=%lu unwritten=%lu "
            "endless=%lu fetches=%lu pieces=%lu codes=",
            failed, st.comms, st.ops, st.setup_eol, st.comm_eol, st.unwritten, st.endless,
            st.calls[K_FETCH], st.pieces);
    for (int i = 0; i < st.ncodes; i++)
        fprintf(out, "%s%d", i ? "," : "", st.codes[i]);
    if (!st.ncodes)
        fputc('-', out);
    fputc('\n', out);
}

/* ---- the two modes -------------------------------------------------------- */

static int one(const char *description)
{
    /* Static: the DLL's info must stay reachable until exit. */
    static struct target t;
    if (load_description(description, &t))
        return 2;
    int failed = session(&t, stdout);
    print_details(stdout);
    print_result(stdout, failed);
    printf("verdict %s\n", failed ? "FAILED" : "ok");
    return failed ? 1 : 0;
}

static int serve(void)
{
    struct target *bases = NULL, cur;
    size_t nbases = 0, base = 0;
    int have = 0;
    memset(&cur, 0, sizeof cur);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        char *w[4];
        int n = split(line, w, 4);
        uint64_t a;
        long v;
        int ok = 1;
        if (n == 0)
            continue;
        if (strcmp(w[0], "quit") == 0) {
            break;
        } else if (strcmp(w[0], "load") == 0 && n == 2) {
            bases = xrealloc(bases, (nbases + 1) * sizeof *bases);
            ok = load_description(w[1], &bases[nbases]) == 0;
            if (ok)
                printf("loaded %zu\n", nbases++);
        } else if (strcmp(w[0], "session") == 0 && n == 2 && !parse_long(w[1], &v) && v >= 0 &&
                   (size_t)v < nbases) {
            if (have)
                free_copy(&cur, &bases[base]);
            base = (size_t)v;
            copy_target(&bases[base], &cur);
            have = 1;
        } else if (strcmp(w[0], "write") == 0 && n == 3 && have && !parse_u64(w[1], &a)) {
            ok = write_hex(&cur, a, w[2]) == 0;
        } else if (strcmp(w[0], "unmap") == 0 && n == 2 && have && !parse_u64(w[1], &a)) {
            unmap_page(&cur, a);
        } else if (strcmp(w[0], "typesize") == 0 && n == 3 && have && !parse_long(w[2], &v)) {
            struct type *ty = find_type_named(&cur, w[1]);
            if (ty)
                ty->size = v;
        } else if (strcmp(w[0], "field") == 0 && n == 4 && have && !parse_long(w[3], &v)) {
            struct type *ty = find_type_named(&cur, w[1]);
            if (ty) {
                struct field *f = find_field(ty, w[2]);
                if (f)
                    f->offset = v;
                else
                    add_field(ty, w[2], v);
            }
        } else if (strcmp(w[0], "run") == 0 && have &&
                   (n == 1 || (n == 2 && strcmp(w[1], "full") == 0))) {
            reset_stats();
            int full = n == 2;
            int failed = session(&cur, full ? stdout : NULL);
            if (full)
                print_details(stdout);
            print_result(stdout, failed);
            /* The session's image and process objects (and the DLL's info
             * on them) are never destroyed, as in padb: their addresses are
             * never reused. The target copy is only read through callbacks
             * during the session. */
            free_copy(&cur, &bases[base]);
            have = 0;
        } else {
            ok = 0;
        }
        if (!ok) {
            printf("error cannot do: %s\n", w[0]);
            fflush(stdout);
            return 2;
        }
        fflush(stdout);
    }
    free(line);
    return 0;
}

int main(int argc, char **argv)
{
    int i = 1;
    if (i < argc && strcmp(argv[i], "-v") == 0) {
        verbose = 1;
        i++;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: strict_host [-v] DLL DESCRIPTION|--serve\n");
        return 2;
    }
    if (load_dll(argv[i]))
        return 2;
    if (strcmp(argv[i + 1], "--serve") == 0)
        return serve();
    return one(argv[i + 1]);
}
