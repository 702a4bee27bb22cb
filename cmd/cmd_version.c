/* cmd_version.c: `simstore --version`: program, library and format versions. */
#include "cli.h"
#include "commands.h"

#include <stdio.h>

int simstore_cli_version(void)
{
    printf("simstore %s (library %s)\n", SIMSTORE_VERSION_STRING, simstore_version_string());
    return CLI_EXIT_OK;
}
