/* fuzz_run_request.c: the RUN body validator on arbitrary JSON. */
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "broker.h"
#include "jobs.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    static struct fmb_config cfg;
    static int init;
    struct run_request rr;
    char why[300];
    if (!init) {
        fmb_config_defaults (&cfg);
        init = 1;
    }
    json_t *o = json_loadb ((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (json_is_object (o) && jobs_parse_run (&cfg, o, &rr, why, sizeof (why)) == 0) {
        if (rr.uid < 0 || rr.node_count < 1 || rr.vni_count > 4 ||
            (rr.tcs & ~cfg.cxi_allowed_tcs))
            __builtin_trap (); /* accepted means valid */
    }
    json_decref (o);
    return 0;
}
