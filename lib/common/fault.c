/* fault.c: the fault points of common/fileio.h (SIMSTORE_FAULT="OP:N[:crash]"),
 * for the test programs and the tools of a test build: an object linked into
 * each of them (CMake's simstore_fault), whose sims_fault_hit replaces the
 * library's do-nothing weak one. Never part of libsimstore. */
#include "common/error.h"
#include "common/fileio.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !SIMS_FAULT_INJECTION
#error "fault.c is for builds with SIMS_FAULT_INJECTION=1"
#endif

static const char *const fault_names[SIMS_FAULT_OP_COUNT] = {
    "write", "fsync", "rename", "mdb_commit", "mdb_committed", "remove"};

static atomic_int fault_state = 0; /* 0 unparsed, 1 off, 2 armed */
static int fault_op = -1;
static long fault_target;
static int fault_crash;
static atomic_long fault_calls[SIMS_FAULT_OP_COUNT];

static void fault_parse(void)
{
    const char *spec = getenv("SIMSTORE_FAULT");
    int state = 1;
    if (spec && *spec) {
        for (int op = 0; op < SIMS_FAULT_OP_COUNT; op++) {
            size_t n = strlen(fault_names[op]);
            if (strncmp(spec, fault_names[op], n) == 0 && spec[n] == ':') {
                char *end;
                long target = strtol(spec + n + 1, &end, 10);
                if (target > 0 && (*end == '\0' || strcmp(end, ":crash") == 0)) {
                    fault_op = op;
                    fault_target = target;
                    fault_crash = *end != '\0';
                    state = 2;
                }
            }
        }
        if (state != 2)
            fprintf(stderr, "simstore: ignoring malformed SIMSTORE_FAULT=%s\n", spec);
    }
    atomic_store(&fault_state, state);
}

int sims_fault_hit(enum sims_fault_op op)
{
    int state = atomic_load_explicit(&fault_state, memory_order_relaxed);
    if (SIMS_LIKELY(state == 1))
        return 0;
    if (state == 0) {
        fault_parse();
        state = atomic_load(&fault_state);
        if (state == 1)
            return 0;
    }
    if ((int)op != fault_op)
        return 0;
    long call = atomic_fetch_add(&fault_calls[op], 1) + 1;
    if (call != fault_target)
        return 0;
    if (fault_crash)
        _exit(86);
    errno = EIO;
    return 1;
}
