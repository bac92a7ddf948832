/* Defined in a second library only. */
#ifndef SYMBOLS_REMOTE_H
#define SYMBOLS_REMOTE_H

#include "symbols_types.h"

struct remote {
    long x;
    char y;
    struct point p;
};

#endif
