/* ratelimit.c: see ratelimit.h.  Tokens are counted in thousandths so a
 * rate of a few per second refills smoothly, without floating point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"
#include "validate.h"

struct bucket {
    char key[JOB_ID_MAX + 1];
    int64_t milli; /* tokens x 1000 */
    int64_t at_ms; /* when 'milli' was last brought up to date */
};

struct ratelimit {
    int64_t rate;  /* tokens per second */
    int64_t burst; /* tokens */
    unsigned nslots;
    struct bucket *b;
};

struct ratelimit *ratelimit_create (unsigned rate, unsigned burst, unsigned slots)
{
    struct ratelimit *rl = calloc (1, sizeof (*rl));
    if (!rl || !(rl->b = calloc (slots ? slots : 1, sizeof (*rl->b)))) {
        free (rl);
        return NULL;
    }
    rl->rate = rate ? rate : 1;
    rl->burst = burst ? burst : 1;
    rl->nslots = slots ? slots : 1;
    return rl;
}

void ratelimit_destroy (struct ratelimit *rl)
{
    if (rl) {
        free (rl->b);
        free (rl);
    }
}

static struct bucket *bucket_of (struct ratelimit *rl, const char *key, int64_t now)
{
    struct bucket *oldest = &rl->b[0];
    for (unsigned i = 0; i < rl->nslots; i++) {
        struct bucket *b = &rl->b[i];
        if (b->key[0] && strcmp (b->key, key) == 0)
            return b;
        if (!b->key[0] || (oldest->key[0] && b->at_ms < oldest->at_ms))
            oldest = b;
    }
    snprintf (oldest->key, sizeof (oldest->key), "%s", key);
    oldest->milli = rl->burst * 1000;
    oldest->at_ms = now;
    return oldest;
}

int64_t ratelimit_take (struct ratelimit *rl, const char *key, int64_t now_ms)
{
    struct bucket *b = bucket_of (rl, key, now_ms);
    if (now_ms > b->at_ms) {
        b->milli += (now_ms - b->at_ms) * rl->rate;
        if (b->milli > rl->burst * 1000)
            b->milli = rl->burst * 1000;
        b->at_ms = now_ms;
    }
    if (b->milli >= 1000) {
        b->milli -= 1000;
        return 0;
    }
    return (1000 - b->milli + rl->rate - 1) / rl->rate;
}
