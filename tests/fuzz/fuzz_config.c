/* fuzz_config.c: the fmbroker.conf parser on arbitrary text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = malloc (size + 1);
    struct fmb_config cfg;
    struct fmb_error e;
    memcpy (text, data, size);
    text[size] = '\0';
    if (fmb_config_load_string (&cfg, "fuzz", text, &e) == 0)
        (void)fmb_config_mcast_limit (&cfg);
    free (text);
    return 0;
}
