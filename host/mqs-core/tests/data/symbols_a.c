/* libsyma, part one: uses every type of symbols_types.h, sees struct hidden
 * and struct remote only as declarations. */
#include "symbols_types.h"

point_t g_point = {1, 2};
point2_t g_point2;
cv_point_t g_cv_point = {3, 4};
struct with_anon g_with_anon;
with_anon_t *g_with_anon_ptr = &g_with_anon;
anon_typedef_t g_anon;
list_item_t g_item;
list_item_ptr_t g_item_ptr = &g_item;
union number g_number;
color_t g_color = GREEN;
matrix_t g_matrix;
struct holder *g_holder;
hidden_t *g_hidden;
remote_t *g_remote;

int global_counter = 7;
static int file_static_counter = 3;
/* Local here, global in libsymb: a global definition wins. */
static int dup_name = 1;

int some_function(int x)
{
    return x + file_static_counter + dup_name;
}

int *static_counter_address(void)
{
    return &file_static_counter;
}
