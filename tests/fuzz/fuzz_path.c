/* fuzz_path.c: route matching, percent-decoding and the id checks of
 * every API route pattern, on arbitrary request paths. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const char *const patterns[] = {
    "/v1/jobs/{job}",
    "/v1/jobs",
    "/v1/jobs/{job}/steps/{step}",
    "/v1/jobs/{job}/nodes/{node}",
    "/v1/events",
    "/metrics",
};

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *path = malloc (size + 1);
    struct api_params p;
    char why[160], out[64];
    memcpy (path, data, size);
    path[size] = '\0';
    for (size_t i = 0; i < sizeof (patterns) / sizeof (patterns[0]); i++)
        if (api_match_path (patterns[i], path, &p, why, sizeof (why)) == 1 &&
            p.step_len)
            if (!valid_step_id (p.step, p.step_len))
                abort (); /* a matched step must be valid */
    (void)percent_decode (path, size, out, sizeof (out));
    free (path);
    return 0;
}
