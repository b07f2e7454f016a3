/* runmemo.c: see runmemo.h. */
#include <stdlib.h>
#include <string.h>

#include "runmemo.h"
#include "validate.h"

struct slot {
    char job[JOB_ID_MAX + 1];
    int64_t created_ms;
    size_t len;
    char body[RUNMEMO_BODY_MAX];
};

struct runmemo {
    unsigned n;
    struct slot *slots; /* job ids hashed; a newer job's body replaces */
};

struct runmemo *runmemo_create (unsigned slots)
{
    struct runmemo *m = calloc (1, sizeof (*m));
    if (m && !(m->slots = calloc (slots ? slots : 1, sizeof (*m->slots)))) {
        free (m);
        return NULL;
    }
    if (m)
        m->n = slots ? slots : 1;
    return m;
}

void runmemo_destroy (struct runmemo *m)
{
    if (m) {
        free (m->slots);
        free (m);
    }
}

static struct slot *slot_of (const struct runmemo *m, const char *job)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)job; *p; p++)
        h = (h ^ *p) * 16777619u;
    return &m->slots[h % m->n];
}

bool runmemo_has (const struct runmemo *m,
                  const char *job,
                  int64_t created_ms,
                  const char *body,
                  size_t len)
{
    const struct slot *s = slot_of (m, job);
    return len > 0 && len == s->len && s->created_ms == created_ms &&
           strcmp (s->job, job) == 0 && memcmp (s->body, body, len) == 0;
}

void runmemo_put (struct runmemo *m,
                  const char *job,
                  int64_t created_ms,
                  const char *body,
                  size_t len)
{
    struct slot *s = slot_of (m, job);
    if (len == 0 || len > sizeof (s->body) || strlen (job) >= sizeof (s->job)) {
        if (strcmp (s->job, job) == 0) /* an earlier run's body: no longer this job's */
            s->len = 0;
        return;
    }
    strcpy (s->job, job);
    s->created_ms = created_ms;
    s->len = len;
    memcpy (s->body, body, len);
}
