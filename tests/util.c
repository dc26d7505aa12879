/* util.c — test helpers. */
#include <stdio.h>
#include <stdlib.h>

#include "tests.h"

void add_suite(const char *name, const char *const *names, void (*const *fns)(void), int n)
{
    CU_pSuite s = CU_add_suite(name, NULL, NULL);
    if (!s) {
        fprintf(stderr, "cannot add suite %s\n", name);
        exit(2);
    }
    for (int i = 0; i < n; i++)
        if (!CU_add_test(s, names[i], fns[i])) {
            fprintf(stderr, "cannot add test %s\n", names[i]);
            exit(2);
        }
}
