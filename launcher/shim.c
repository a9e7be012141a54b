/* shim: see shim.h. Placeholder until the real shim lands (minutes away). */
#include "shim.h"

#include <stdio.h>

int ddp_shim_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ddplaunch: exec shim not implemented yet\n");
    return 1;
}
