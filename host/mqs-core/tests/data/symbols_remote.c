/* libsymb: the only definition of struct remote, plus some of the types
 * libsyma uses too (so that dwz has something to share). */
#include "symbols_types.h"
#include "symbols_remote.h"

struct remote g_remote_def;
struct with_anon g_b_with_anon;
list_item_t g_b_item;
point2_t g_b_point;
anon_typedef_t g_b_anon;
union number g_b_number;
int dup_name = 2;

long remote_x(struct remote *r)
{
    return r->x + dup_name;
}
