/* fpversion.h: the one rule that turns a simstore_text_options' version
 * field into a fingerprint version: 0 (a zero-filled struct) is the current
 * default, SIMSTORE_FP_VERSION_DEFAULT (3 since version 3 joined Han and
 * kana across spaces: new stores get it); 1, 2 and 3 are themselves. A
 * store answers with the version it recorded, never with this default. */
#ifndef SIMS_COMMON_FPVERSION_H
#define SIMS_COMMON_FPVERSION_H

#include "simstore.h"

static inline unsigned sims_fp_version(unsigned version)
{
    return version ? version : SIMSTORE_FP_VERSION_DEFAULT;
}

#endif
