/*
 * cmd_ranks.c — `fp8prof ranks RUN.h5`: the analyses across the ranks of a
 * multi-rank run (analyses/ranks.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fp8_error.h"
#include "ranks.h"

int cmd_ranks(int argc, char **argv)
{
    const char *path = NULL, *heat = NULL, *dir = NULL;
    int json = 0, check = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0)
            json = 1;
        else if (strcmp(a, "--check") == 0)
            check = 1;
        else if ((strcmp(a, "--heatmap") == 0 || strcmp(a, "-o") == 0) && i + 1 >= argc)
            return cli_usage_error("ranks: %s needs a value", a);
        else if (strcmp(a, "--heatmap") == 0)
            heat = argv[++i];
        else if (strcmp(a, "-o") == 0)
            dir = argv[++i];
        else if (a[0] == '-')
            return cli_usage_error("ranks: unknown option '%s'", a);
        else if (path)
            return cli_usage_error("ranks: one run at a time ('%s' and '%s')", path, a);
        else
            path = a;
    }
    if (!path)
        return cli_usage_error("ranks needs RUN.h5 (a multi-rank run's index)");
    if (heat && !dir)
        return cli_usage_error("ranks: --heatmap needs -o DIR");
    an_ranks R;
    if (an_ranks_load(path, &R) != 0) {
        fprintf(stderr, "fp8prof: ranks: %s\n", fp8_error_message());
        return 1;
    }
    if (json)
        an_ranks_json(&R, stdout);
    else
        an_ranks_print(&R, stdout);
    int rc = 0;
    if (heat) {
        if (an_ranks_heatmap(&R, heat, dir, "ranks_heatmap") != 0) {
            fprintf(stderr, "fp8prof: ranks: %s\n", fp8_error_message());
            rc = 1;
        } else if (!json)
            printf("heat map: %s/ranks_heatmap.png\n", dir);
    }
    if (!rc && check && an_ranks_bad(&R))
        rc = 3;
    an_ranks_free(&R);
    return rc;
}
