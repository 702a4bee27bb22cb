/* cmd_version.c: `simstore --version`: program and library versions, and the
 * CJK segmenter fingerprints use on this machine (friso, or the bigram
 * fallback and why). */
#include "cli.h"
#include "commands.h"

#include <stdio.h>

int simstore_cli_version(void)
{
    const char *segmenter = NULL;
    simstore_cjk_segmenter(&segmenter);
    printf("simstore %s (library %s)\n", SIMSTORE_VERSION_STRING, simstore_version_string());
    printf("CJK segmenter: %s\n", segmenter);
    return CLI_EXIT_OK;
}
