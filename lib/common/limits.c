/* limits.c: format rules that several layers check, given one owner here (the
 * layer below all of them): the table block sizes (simstore_block_bytes_valid,
 * simstore.h), which the codec, table files, store records, builds and the
 * tool's --block-bytes all go through. */
#include "simstore.h"

int simstore_block_bytes_valid(uint64_t block_bytes)
{
    return block_bytes >= SIMSTORE_MIN_BLOCK_BYTES && block_bytes <= SIMSTORE_MAX_BLOCK_BYTES &&
           (block_bytes & (block_bytes - 1)) == 0;
}
