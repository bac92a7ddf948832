/*
 * mpit_fixture.c: a stand-in MPI library with a small MPI_T (control
 * variables only), in MPICH's ABI (int datatype handles, MPICH's constants),
 * for the tests of `mqs-dump cvars`.
 *
 * By default it follows every rule `mqs-dump cvars --check` checks. With
 * MQS_FIXTURE_BREAK=<rule id>[,<rule id>...] it breaks those rules on
 * purpose, each in one way (the comments that say "break" show how). MQS_FIXTURE_MODE makes it misbehave as a whole:
 *   crash-in-init, abort-in-init, exit-in-init, hang-in-init  (in
 *   MPI_T_init_thread), print-in-init (prints to stdout, then works),
 *   crash-in-read (MPI_T_cvar_read crashes), errors (MPI_T_cvar_get_info
 *   refuses variable 4 as if it were gone, MPI_T_cvar_read fails for 2).
 * MPIR_CVAR_MQS_EAGER_LIMIT in the environment sets that variable, as MPICH
 * takes its variables from the environment.
 *
 * Built with -DNO_MPI_T: an MPI library without the tool interface.
 * Built with -DNOT_MPI: a library with no MPI in it at all.
 *
 * The variables (index: name, datatype, scope, value):
 *   0 MPIR_CVAR_MQS_EAGER_LIMIT   MPI_INT            local     4096
 *   1 MPIR_CVAR_MQS_PROTOCOL      MPI_INT (enum)     all_eq    2 (auto)
 *   2 MPIR_CVAR_MQS_BUFFER_BYTES  MPI_UNSIGNED_LONG  local     1048576
 *   3 MPIR_CVAR_MQS_DEVICE        MPI_CHAR           readonly  "ch3:nemesis"
 *   4 MPIR_CVAR_MQS_BACKOFF       MPI_DOUBLE         local     0.25
 *   5 MPIR_CVAR_MQS_COMM_HINT     MPI_INT            local     bound to MPI_COMM
 *   6 MPIR_CVAR_MQS_VERSION       MPI_INT            constant  3, no description
 *   7 MPIR_CVAR_MQS_RANGE         MPI_INT, count 2   group_eq  1,64
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NOT_MPI

int mqs_fixture_not_mpi(void) { return 0; }

#else

/* MPICH's mpi.h refers to this (MPI_DUP_FN): mqs recognises the ABI by it. */
int MPIR_Dup_fn(void)
{
    return 0;
}

int MPI_Init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

#ifndef NO_MPI_T

#define MPI_SUCCESS 0
#define ERR_MEMORY 59
#define ERR_NOT_INITIALIZED 60
#define ERR_INVALID_INDEX 62
#define ERR_INVALID_ITEM 63
#define ERR_INVALID_HANDLE 64
#define ERR_CVAR_SET_NEVER 69
#define ERR_INVALID_NAME 73
#define ERR_INVALID 74

typedef int MPI_Datatype;
#define MPI_CHAR 0x4c000101
#define MPI_INT 0x4c000405
#define MPI_UNSIGNED_LONG 0x4c000808
#define MPI_DOUBLE 0x4c00080b

enum { USER_BASIC = 221, USER_DETAIL, USER_ALL, TUNER_BASIC, TUNER_DETAIL, TUNER_ALL };
enum { BIND_NO_OBJECT = 9700, BIND_MPI_COMM };
enum { SCOPE_CONSTANT = 60438, SCOPE_READONLY, SCOPE_LOCAL, SCOPE_GROUP, SCOPE_GROUP_EQ,
       SCOPE_ALL, SCOPE_ALL_EQ };

struct item {
    int value;
    const char *name;
};

struct enumeration {
    const char *name;
    int count;
    struct item items[3];
};

static struct enumeration protocol = {
    "mqs_protocol", 3, {{0, "eager"}, {1, "rndv"}, {2, "auto"}}};
static struct enumeration protocol_broken = {
    "mqs_protocol", 3, {{0, "eager"}, {1, "eager"}, {2, "auto"}}};

union storage {
    int ints[2];
    unsigned long ul;
    double d;
    char text[64];
};

struct var {
    const char *name;
    const char *desc;
    int verbosity;
    MPI_Datatype datatype;
    struct enumeration *enumeration;
    int bind;
    int scope;
    int count;
    union storage value;
};

static struct var vars[] = {
    {"MPIR_CVAR_MQS_EAGER_LIMIT", "Largest message sent eagerly, in bytes.", USER_BASIC,
     MPI_INT, NULL, BIND_NO_OBJECT, SCOPE_LOCAL, 1, {.ints = {4096}}},
    {"MPIR_CVAR_MQS_PROTOCOL", "Which protocol to use.", USER_DETAIL, MPI_INT, &protocol,
     BIND_NO_OBJECT, SCOPE_ALL_EQ, 1, {.ints = {2}}},
    {"MPIR_CVAR_MQS_BUFFER_BYTES", "Bytes of buffer per peer.", TUNER_DETAIL,
     MPI_UNSIGNED_LONG, NULL, BIND_NO_OBJECT, SCOPE_LOCAL, 1, {.ul = 1048576}},
    {"MPIR_CVAR_MQS_DEVICE", "The device in use.", USER_ALL, MPI_CHAR, NULL, BIND_NO_OBJECT,
     SCOPE_READONLY, 64, {.text = "ch3:nemesis"}},
    {"MPIR_CVAR_MQS_BACKOFF", "Seconds to back off.", TUNER_ALL, MPI_DOUBLE, NULL,
     BIND_NO_OBJECT, SCOPE_LOCAL, 1, {.d = 0.25}},
    {"MPIR_CVAR_MQS_COMM_HINT", "A hint per communicator.", TUNER_BASIC, MPI_INT, NULL,
     BIND_MPI_COMM, SCOPE_LOCAL, 1, {.ints = {0}}},
    {"MPIR_CVAR_MQS_VERSION", "", USER_BASIC, MPI_INT, NULL, BIND_NO_OBJECT, SCOPE_CONSTANT,
     1, {.ints = {3}}},
    {"MPIR_CVAR_MQS_RANGE", "Smallest and largest segment, in kilobytes.", TUNER_BASIC,
     MPI_INT, NULL, BIND_NO_OBJECT, SCOPE_GROUP_EQ, 2, {.ints = {1, 64}}},
};
#define NUM_VARS ((int)(sizeof(vars) / sizeof(vars[0])))

static int initialized;
static int ever_initialized;
static int get_num_calls;
static int writes;

struct handle {
    int index;
};

/* Whether MQS_FIXTURE_BREAK (a comma-separated list of rule ids) names
 * `rule`. */
static int broken(const char *rule)
{
    const char *b = getenv("MQS_FIXTURE_BREAK");
    size_t n = strlen(rule);
    while (b != NULL && *b != '\0') {
        if (strncmp(b, rule, n) == 0 && (b[n] == ',' || b[n] == '\0'))
            return 1;
        b = strchr(b, ',');
        if (b != NULL)
            b++;
    }
    return 0;
}

static int mode(const char *m)
{
    const char *b = getenv("MQS_FIXTURE_MODE");
    return b != NULL && strcmp(b, m) == 0;
}

/* The standard's convention for returning strings. */
static void copy_string(char *buf, int *len, const char *s)
{
    int full;
    if (len == NULL)
        return;
    full = (int)strlen(s) + 1;
    if (buf != NULL && *len > 0) {
        int n = *len - 1 < full - 1 ? *len - 1 : full - 1;
        memcpy(buf, s, (size_t)n);
        buf[n] = '\0';
        /* break "string-return": a cut string gives the buffer's length. */
        if (broken("string-return") && *len < full) {
            return;
        }
    }
    *len = full;
}

int MPI_Get_library_version(char *version, int *len)
{
    strcpy(version, "mqs MPI_T fixture 1.0");
    *len = (int)strlen(version);
    return MPI_SUCCESS;
}

int MPI_T_init_thread(int required, int *provided)
{
    const char *eager = getenv("MPIR_CVAR_MQS_EAGER_LIMIT");
    /* A real fault: a raised SIGSEGV can be caught and ignored. */
    if (mode("crash-in-init"))
        *(volatile int *)0 = 1;
    if (mode("abort-in-init"))
        abort();
    if (mode("exit-in-init"))
        exit(3);
    if (mode("hang-in-init"))
        for (;;)
            pause();
    if (mode("print-in-init")) {
        printf("fixture: noise on stdout {\"event\": not json\n");
        fflush(stdout);
    }
    if (eager != NULL)
        vars[0].value.ints[0] = atoi(eager);
    if (broken("enumerations"))
        vars[1].enumeration = &protocol_broken;
    if (broken("names"))
        vars[7].name = vars[0].name;
    if (broken("constants"))
        vars[4].scope = 12345;
    initialized++;
    ever_initialized = 1;
    /* break "init": a provided level that is no thread level. */
    *provided = broken("init") ? 7 : required;
    return MPI_SUCCESS;
}

int MPI_T_finalize(void)
{
    if (initialized == 0)
        return ERR_NOT_INITIALIZED;
    /* break "nesting": the first finalize ends it all. */
    initialized = broken("nesting") ? 0 : initialized - 1;
    return MPI_SUCCESS;
}

int MPI_T_cvar_get_num(int *num)
{
    /* break "not-initialized": answers before the first MPI_T_init_thread. */
    if (!initialized && !(broken("not-initialized") && !ever_initialized))
        return ERR_NOT_INITIALIZED;
    get_num_calls++;
    /* break "num": every second call has one variable fewer. */
    *num = broken("num") && get_num_calls % 2 == 0 ? NUM_VARS - 1 : NUM_VARS;
    return MPI_SUCCESS;
}

int MPI_T_cvar_get_info(int index, char *name, int *name_len, int *verbosity,
                        MPI_Datatype *datatype, void **enumtype, char *desc, int *desc_len,
                        int *bind, int *scope)
{
    struct var *v;
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (index < 0 || index >= NUM_VARS)
        /* break "index-range": the wrong code. */
        return broken("index-range") ? ERR_INVALID : ERR_INVALID_INDEX;
    /* break "null-out": NULL OUT parameters are refused. */
    if (broken("null-out") &&
        (verbosity == NULL || datatype == NULL || enumtype == NULL || bind == NULL ||
         scope == NULL))
        return ERR_INVALID;
    if (mode("errors") && index == 4)
        return ERR_INVALID_INDEX;
    v = &vars[index];
    copy_string(name, name_len, v->name);
    copy_string(desc, desc_len, v->desc);
    if (verbosity != NULL) {
        *verbosity = v->verbosity;
        /* break "stable": once written to, variable 0 changes verbosity. */
        if (broken("stable") && index == 0 && writes > 0)
            *verbosity = TUNER_ALL;
    }
    if (datatype != NULL)
        *datatype = v->datatype;
    if (enumtype != NULL)
        *enumtype = v->enumeration;
    if (bind != NULL)
        *bind = v->bind;
    if (scope != NULL)
        *scope = v->scope;
    return MPI_SUCCESS;
}

int MPI_T_cvar_get_index(const char *name, int *index)
{
    int i;
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    for (i = 0; i < NUM_VARS; i++) {
        if (strcmp(vars[i].name, name) == 0) {
            *index = i;
            return MPI_SUCCESS;
        }
    }
    /* break "get-index": the wrong code for an unknown name. */
    return broken("get-index") ? ERR_INVALID_INDEX : ERR_INVALID_NAME;
}

int MPI_T_cvar_handle_alloc(int index, void *object, struct handle **handle, int *count)
{
    (void)object;
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (index < 0 || index >= NUM_VARS)
        return broken("index-range") ? ERR_INVALID : ERR_INVALID_INDEX;
    *handle = malloc(sizeof(**handle));
    if (*handle == NULL)
        return ERR_MEMORY;
    (*handle)->index = index;
    *count = vars[index].count;
    return MPI_SUCCESS;
}

int MPI_T_cvar_handle_free(struct handle **handle)
{
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (handle == NULL || *handle == NULL)
        return ERR_INVALID_HANDLE;
    free(*handle);
    *handle = NULL;
    return MPI_SUCCESS;
}

static size_t value_size(const struct var *v)
{
    switch (v->datatype) {
    case MPI_CHAR:
        return (size_t)v->count;
    case MPI_INT:
        return sizeof(int) * (size_t)v->count;
    default:
        return 8 * (size_t)v->count;
    }
}

int MPI_T_cvar_read(struct handle *handle, void *buf)
{
    const struct var *v;
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (mode("crash-in-read"))
        *(volatile int *)0 = 1;
    /* break "null-handle": a NULL handle is dereferenced. */
    if (handle == NULL && !broken("null-handle"))
        return ERR_INVALID_HANDLE;
    if (mode("errors") && handle->index == 2)
        return ERR_INVALID;
    v = &vars[handle->index];
    memcpy(buf, &v->value, value_size(v));
    /* break "handles": one element more than count is written. */
    if (broken("handles") && v->datatype == MPI_INT)
        memset((char *)buf + value_size(v), 0, sizeof(int));
    return MPI_SUCCESS;
}

int MPI_T_cvar_write(struct handle *handle, const void *buf)
{
    struct var *v;
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (handle == NULL)
        return ERR_INVALID_HANDLE;
    writes++;
    v = &vars[handle->index];
    /* break "read-only-write": read-only variables take writes. */
    if ((v->scope == SCOPE_CONSTANT || v->scope == SCOPE_READONLY) &&
        !broken("read-only-write"))
        return ERR_CVAR_SET_NEVER;
    if (v->enumeration != NULL) {
        int value = *(const int *)buf, i, known = 0;
        for (i = 0; i < v->enumeration->count; i++)
            known |= v->enumeration->items[i].value == value;
        if (!known)
            return ERR_INVALID;
    }
    memcpy(&v->value, buf, value_size(v));
    return MPI_SUCCESS;
}

int MPI_T_enum_get_info(struct enumeration *e, int *num, char *name, int *name_len)
{
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    if (num != NULL)
        *num = e->count;
    copy_string(name, name_len, e->name);
    return MPI_SUCCESS;
}

int MPI_T_enum_get_item(struct enumeration *e, int index, int *value, char *name,
                        int *name_len)
{
    if (!initialized)
        return ERR_NOT_INITIALIZED;
    if (e == NULL)
        return ERR_INVALID_HANDLE;
    if (index < 0 || index >= e->count)
        /* break "enum-item-range": the code for a bad variable index. */
        return broken("enum-item-range") ? ERR_INVALID_INDEX : ERR_INVALID_ITEM;
    if (value != NULL)
        *value = e->items[index].value;
    copy_string(name, name_len, e->items[index].name);
    return MPI_SUCCESS;
}

#endif /* NO_MPI_T */
#endif /* NOT_MPI */
