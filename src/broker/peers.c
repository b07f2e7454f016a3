/* peers.c: see peers.h.  A plain array searched linearly: it holds one
 * entry per connected uid, at most max_total, and is touched once per
 * accept and once per close. */
#include <stdlib.h>

#include "peers.h"

struct peer_entry {
    uid_t uid;
    unsigned n;
};

struct peers {
    struct peer_limits lim;
    unsigned total;
    unsigned unprivileged;
    struct peer_entry *e;
    unsigned ne;
};

struct peers *peers_create (const struct peer_limits *lim)
{
    struct peers *p = calloc (1, sizeof (*p));
    if (!p)
        return NULL;
    p->lim = *lim;
    p->e = calloc (lim->max_total ? lim->max_total : 1, sizeof (*p->e));
    if (!p->e) {
        free (p);
        return NULL;
    }
    return p;
}

void peers_destroy (struct peers *p)
{
    if (p) {
        free (p->e);
        free (p);
    }
}

static struct peer_entry *find (const struct peers *p, uid_t uid)
{
    for (unsigned i = 0; i < p->ne; i++)
        if (p->e[i].uid == uid)
            return &p->e[i];
    return NULL;
}

bool peers_admit (struct peers *p, uid_t uid, bool privileged, const char **why)
{
    const char *no = NULL;
    struct peer_entry *e = find (p, uid);
    unsigned shared =
        p->lim.max_total > p->lim.reserved ? p->lim.max_total - p->lim.reserved : 0;
    if (p->total >= p->lim.max_total)
        no = "max_connections";
    else if (!privileged && p->unprivileged >= shared)
        no = "max_connections less reserved_connections";
    else if (!privileged && e && e->n >= p->lim.per_user)
        no = "max_connections_per_user";
    if (no) {
        if (why)
            *why = no;
        return false;
    }
    if (!e) { /* total < max_total, so a free entry exists */
        e = &p->e[p->ne++];
        e->uid = uid;
        e->n = 0;
    }
    e->n++;
    p->total++;
    if (!privileged)
        p->unprivileged++;
    return true;
}

void peers_release (struct peers *p, uid_t uid, bool privileged)
{
    struct peer_entry *e = find (p, uid);
    if (!e || e->n == 0)
        return;
    if (--e->n == 0)
        *e = p->e[--p->ne];
    p->total--;
    if (!privileged && p->unprivileged)
        p->unprivileged--;
}

unsigned peers_count (const struct peers *p, uid_t uid)
{
    const struct peer_entry *e = find (p, uid);
    return e ? e->n : 0;
}
