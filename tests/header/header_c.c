/* header_c.c: the public header alone compiles as strict C11. */
#include "simstore.h"

int main(void)
{
    return simstore_distance(0, 0) == 0 && simstore_version_number() == SIMSTORE_VERSION_NUMBER ? 0
                                                                                                : 1;
}
