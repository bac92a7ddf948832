/* libsyma, part two: the only definition of struct hidden. */
#include "symbols_types.h"
#include "symbols_hidden.h"

struct hidden g_hidden_def;

double hidden_c(struct hidden *h)
{
    return h->c;
}
