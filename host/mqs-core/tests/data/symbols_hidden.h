/* The definition that symbols_a.c never sees. */
#ifndef SYMBOLS_HIDDEN_H
#define SYMBOLS_HIDDEN_H

struct hidden {
    int a;
    char b[10];
    double c;
    void *d;
};

#endif
