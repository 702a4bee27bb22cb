// header_cxx.cpp: the public headers (simstore.h, simstore_unstable.h) alone compile as strict C++.
#include "simstore.h"
#include "simstore_unstable.h"

int main()
{
    return simstore_distance(0, ~0ULL) == 64 && simstore_version_number() == SIMSTORE_VERSION_NUMBER
               ? 0
               : 1;
}
