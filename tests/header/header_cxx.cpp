// header_cxx.cpp: the public header alone compiles as strict C++.
#include "simstore.h"

int main()
{
    return simstore_distance(0, ~0ULL) == 64 && simstore_version_number() == SIMSTORE_VERSION_NUMBER
               ? 0
               : 1;
}
