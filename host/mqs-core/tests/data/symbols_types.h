/* Types for the symbol-index tests (host/tests/symbols_dwarf.rs): every
 * layout here is checked against what the C compiler says (symbols_oracle.c). */
#ifndef SYMBOLS_TYPES_H
#define SYMBOLS_TYPES_H

#include <stdint.h>

typedef struct point {
    int x;
    int y;
} point_t;
typedef point_t point2_t;                    /* a typedef of a typedef */
typedef const volatile point2_t cv_point_t;  /* qualifiers over the chain */

struct with_anon {
    char tag;
    union {                  /* an anonymous union ... */
        int32_t i;
        double d;
        struct {             /* ... holding an anonymous struct ... */
            short lo;
            short hi;
            union {          /* ... holding another anonymous union */
                char c;
                long l;
            };
        };
    };
    struct {                 /* named member of an unnamed type: not flattened, */
        char a;              /* its members named by path (named_inner.b) */
        long b;
        struct {
            short s;
        } deeper;            /* named_inner.deeper.s */
    } named_inner;
    long tail;
    unsigned flags : 3;
    unsigned more : 7;
    uint64_t after_bits;
};
typedef struct with_anon with_anon_t;

typedef struct {
    int a;
    char b[5];
    double c;
} anon_typedef_t;

struct list_item {
    struct list_item *next;
    struct list_item *prev;
    void *payload;
    int kind;
};
typedef struct list_item list_item_t;
typedef list_item_t *list_item_ptr_t;

union number {
    char c[3];
    int i;
    long l;
};

enum color { RED, GREEN = 5, BLUE = 1 << 20 };
typedef enum color color_t;

typedef int matrix_t[3][4];

/* Declared only: defined in symbols_b.c (same library) ... */
struct hidden;
typedef struct hidden hidden_t;
/* ... and in symbols_remote.c (another library). */
struct remote;
typedef struct remote remote_t;

struct holder {
    hidden_t *h;
    remote_t *r;
    matrix_t m;
    color_t color;
    union number n;
    char flex[];
};

#endif
