/* header_c.c: the public headers (simstore.h, simstore_unstable.h) alone compile as strict C11. */
#include "simstore.h"
#include "simstore_unstable.h"

int main(void)
{
    return simstore_distance(0, 0) == 0 && simstore_version_number() == SIMSTORE_VERSION_NUMBER ? 0
                                                                                                : 1;
}
