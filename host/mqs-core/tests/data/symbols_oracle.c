/* Prints what the C compiler says about the layouts the symbol-index tests
 * check: "size<TAB>type<TAB>n" and "offset<TAB>type<TAB>field<TAB>n". */
#include <stddef.h>
#include <stdio.h>

#include "symbols_types.h"
#include "symbols_hidden.h"
#include "symbols_remote.h"

#define SIZE(T) printf("size\t%s\t%zu\n", #T, sizeof(T))
#define OFF(T, f) printf("offset\t%s\t%s\t%zu\n", #T, #f, offsetof(T, f))

int main(void)
{
    SIZE(point_t);
    OFF(point_t, x);
    OFF(point_t, y);
    SIZE(struct point);
    OFF(struct point, y);
    SIZE(point2_t);
    OFF(point2_t, y);
    SIZE(cv_point_t);
    OFF(cv_point_t, y);

    SIZE(struct with_anon);
    SIZE(with_anon_t);
    OFF(with_anon_t, tag);
    OFF(with_anon_t, i);
    OFF(with_anon_t, d);
    OFF(with_anon_t, lo);
    OFF(with_anon_t, hi);
    OFF(with_anon_t, c);
    OFF(with_anon_t, l);
    OFF(with_anon_t, named_inner);
    OFF(with_anon_t, named_inner.a);
    OFF(with_anon_t, named_inner.b);
    OFF(with_anon_t, named_inner.deeper);
    OFF(with_anon_t, named_inner.deeper.s);
    OFF(with_anon_t, tail);
    OFF(with_anon_t, after_bits);
    OFF(struct with_anon, hi);

    SIZE(anon_typedef_t);
    OFF(anon_typedef_t, a);
    OFF(anon_typedef_t, b);
    OFF(anon_typedef_t, c);

    SIZE(list_item_t);
    OFF(list_item_t, next);
    OFF(list_item_t, prev);
    OFF(list_item_t, payload);
    OFF(list_item_t, kind);
    SIZE(list_item_ptr_t);

    SIZE(union number);
    OFF(union number, c);
    OFF(union number, i);
    OFF(union number, l);

    SIZE(enum color);
    SIZE(color_t);
    SIZE(matrix_t);

    SIZE(hidden_t);
    OFF(hidden_t, a);
    OFF(hidden_t, b);
    OFF(hidden_t, c);
    OFF(hidden_t, d);
    SIZE(struct hidden);

    SIZE(remote_t);
    OFF(remote_t, x);
    OFF(remote_t, y);
    OFF(remote_t, p);
    SIZE(struct remote);

    SIZE(struct holder);
    OFF(struct holder, h);
    OFF(struct holder, r);
    OFF(struct holder, m);
    OFF(struct holder, color);
    OFF(struct holder, n);
    OFF(struct holder, flex);

    SIZE(int);
    SIZE(unsigned int);
    SIZE(long int);
    SIZE(char);
    SIZE(double);
    return 0;
}
