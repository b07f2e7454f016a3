/* refusallog.c: see refusallog.h.  The window's callers in a small
 * open-addressed table (emptied at each window's end); callers past
 * its size share one entry, "other callers". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "refusallog.h"

#define SLOTS 1024 /* a power of two; at most 3/4 used */

struct entry {
    char key[REFUSALLOG_KEY_MAX];
    unsigned lines, dropped;
};

struct refusallog {
    int64_t window_ms; /* its start; 0: no window open */
    unsigned lines;    /* past each caller's first, in this window */
    unsigned used;
    unsigned dropped; /* in all */
    struct entry slot[SLOTS];
    struct entry other;
};

struct refusallog *refusallog_create (void)
{
    struct refusallog *rl = calloc (1, sizeof (*rl));
    if (rl)
        snprintf (rl->other.key, sizeof (rl->other.key), "other callers");
    return rl;
}

void refusallog_destroy (struct refusallog *rl)
{
    free (rl);
}

static struct entry *entry_of (struct refusallog *rl, const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    for (unsigned i = 0; i < SLOTS; i++) {
        struct entry *e = &rl->slot[(h + i) & (SLOTS - 1)];
        if (!e->key[0]) {
            if (rl->used >= SLOTS / 4 * 3)
                return &rl->other;
            rl->used++;
            snprintf (e->key, sizeof (e->key), "%s", key);
            return e;
        }
        if (strcmp (e->key, key) == 0)
            return e;
    }
    return &rl->other;
}

bool refusallog_due (struct refusallog *rl, const char *key, int64_t now_ms)
{
    refusallog_flush (rl, now_ms);
    if (!rl->window_ms)
        rl->window_ms = now_ms ? now_ms : 1;
    struct entry *e = entry_of (rl, key[0] ? key : "?");
    bool due =
        e->lines == 0 || (e->lines < REFUSALLOG_PER_KEY && rl->lines < REFUSALLOG_MAX);
    if (!due) {
        e->dropped++;
        rl->dropped++;
        return false;
    }
    if (e->lines++)
        rl->lines++;
    return true;
}

static int by_dropped (const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a;
    const struct entry *y = *(const struct entry *const *)b;
    return x->dropped < y->dropped ? 1 : x->dropped > y->dropped ? -1 : 0;
}

void refusallog_flush (struct refusallog *rl, int64_t now_ms)
{
    if (!rl->window_ms || now_ms - rl->window_ms < REFUSALLOG_WINDOW_MS)
        return;
    if (rl->dropped) {
        struct entry *say[SLOTS + 1];
        unsigned n = 0, named = 0, rest = 0;
        for (unsigned i = 0; i < SLOTS; i++)
            if (rl->slot[i].dropped)
                say[n++] = &rl->slot[i];
        if (rl->other.dropped)
            say[n++] = &rl->other;
        qsort (say, n, sizeof (say[0]), by_dropped);
        for (unsigned i = 0; i < n; i++) {
            if (named++ < REFUSALLOG_SAY_MAX)
                fmb_log (LOG_WARNING,
                         "api: %u more refusals or failed authentications of %s not "
                         "logged in the last %d s (at most %d lines per caller)",
                         say[i]->dropped,
                         say[i]->key,
                         REFUSALLOG_WINDOW_MS / 1000,
                         REFUSALLOG_PER_KEY);
            else
                rest += say[i]->dropped;
        }
        if (rest)
            fmb_log (LOG_WARNING,
                     "api: %u more refusals or failed authentications of %u other "
                     "callers not logged in the last %d s",
                     rest,
                     n - REFUSALLOG_SAY_MAX,
                     REFUSALLOG_WINDOW_MS / 1000);
    }
    memset (rl->slot, 0, sizeof (rl->slot));
    rl->other.lines = rl->other.dropped = 0;
    rl->window_ms = 0;
    rl->lines = rl->used = rl->dropped = 0;
}

int64_t refusallog_next_ms (const struct refusallog *rl, int64_t now_ms)
{
    if (!rl->window_ms || !rl->dropped)
        return -1;
    int64_t left = rl->window_ms + REFUSALLOG_WINDOW_MS - now_ms;
    return left > 0 ? left : 0;
}
