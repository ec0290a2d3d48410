/* placeholder until tmm bench matmul lands (being written now) */
#include <stdio.h>

#include "cli.h"

int cmd_bench(int argc, char **argv)
{
    fprintf(stderr, "tmm bench: not built yet\n");
    return 1;
}
