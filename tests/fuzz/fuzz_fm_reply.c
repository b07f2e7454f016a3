/* fuzz_fm_reply.c: the parsers of FM answers (job object, jobs listing)
 * on arbitrary bodies, as a broken or hostile FM might send them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fmclient.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    json_t *o = json_loadb ((const char *)data, size, 0, NULL);
    const char *token, **ids;
    long limit;
    size_t n;
    if (o) {
        if (fmc_reply_job (o, &token, &limit) == 0 && (!token || !*token))
            abort ();
        if (fmc_reply_list (o, &ids, &n) == 0) {
            for (size_t i = 0; i < n; i++)
                if (!*ids[i] || strchr (ids[i], '/'))
                    abort (); /* ids are single path segments */
            free (ids);
        }
    }
    json_decref (o);
    return 0;
}
