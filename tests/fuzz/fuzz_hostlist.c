/* fuzz_hostlist.c: compressed host-list expansion (run-job --nodes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = malloc (size + 1);
    struct fmb_error e;
    memcpy (text, data, size);
    text[size] = '\0';
    json_t *a = json_array ();
    (void)hostlist_expand (text, a, &e);
    if (json_array_size (a) > HOSTLIST_MAX)
        abort ();
    json_decref (a);
    free (text);
    return 0;
}
