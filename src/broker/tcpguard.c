/* tcpguard.c: see tcpguard.h.  Two arrays: the open connections'
 * addresses (at most max_total entries, found through a hash: an accept
 * of a full machine's nodes, and an eviction's look at the oldest
 * connections' addresses, must not read every address) and the
 * addresses that failed lately (FAIL_SLOTS, searched linearly, touched
 * once per failure; the one idle longest is recycled). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcpguard.h"

#define FAIL_SLOTS 4096

struct conn_entry {
    char addr[TCPGUARD_ADDR_MAX];
    unsigned n;
    unsigned unauth; /* of n, not yet authenticated */
    int hnext;       /* the next entry in its hash bucket, or -1 */
};

struct fail_entry {
    char addr[TCPGUARD_ADDR_MAX];
    unsigned fails;
    unsigned unlogged;
    int64_t last_ms;
    int64_t next_ms; /* the address's next answer, in turn */
    int64_t logged_ms;
};

struct tcpguard {
    struct tcpguard_limits lim;
    unsigned total;
    unsigned unauth;
    struct conn_entry *c;
    unsigned nc;
    int *bucket;       /* the first entry of each, or -1 */
    unsigned nbuckets; /* a power of two */
    struct fail_entry *f;
};

struct tcpguard *tcpguard_create (const struct tcpguard_limits *lim)
{
    struct tcpguard *g = calloc (1, sizeof (*g));
    if (!g)
        return NULL;
    g->lim = *lim;
    g->c = calloc (lim->max_total + TCPGUARD_EVICTING_MAX, sizeof (*g->c));
    g->f = calloc (FAIL_SLOTS, sizeof (*g->f));
    for (g->nbuckets = 64; g->nbuckets < lim->max_total + TCPGUARD_EVICTING_MAX;)
        g->nbuckets *= 2;
    g->bucket = malloc (g->nbuckets * sizeof (*g->bucket));
    if (!g->c || !g->f || !g->bucket) {
        tcpguard_destroy (g);
        return NULL;
    }
    memset (g->bucket, 0xff, g->nbuckets * sizeof (*g->bucket)); /* all -1 */
    return g;
}

void tcpguard_destroy (struct tcpguard *g)
{
    if (g) {
        free (g->bucket);
        free (g->c);
        free (g->f);
        free (g);
    }
}

static unsigned hash_of (const struct tcpguard *g, const char *addr)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)addr; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h & (g->nbuckets - 1);
}

static struct conn_entry *find_conn (const struct tcpguard *g, const char *addr)
{
    for (int i = g->bucket[hash_of (g, addr)]; i >= 0; i = g->c[i].hnext)
        if (strcmp (g->c[i].addr, addr) == 0)
            return &g->c[i];
    return NULL;
}

static void hash_unlink (struct tcpguard *g, int i)
{
    for (int *pp = &g->bucket[hash_of (g, g->c[i].addr)]; *pp >= 0;
         pp = &g->c[*pp].hnext)
        if (*pp == i) {
            *pp = g->c[i].hnext;
            return;
        }
}

static void hash_link (struct tcpguard *g, int i)
{
    int *head = &g->bucket[hash_of (g, g->c[i].addr)];
    g->c[i].hnext = *head;
    *head = i;
}

/* Entry 'e' goes; the last takes its place in the array. */
static void conn_remove (struct tcpguard *g, struct conn_entry *e)
{
    int i = (int)(e - g->c), last = (int)g->nc - 1;
    hash_unlink (g, i);
    if (i != last) {
        hash_unlink (g, last);
        g->c[i] = g->c[last];
        hash_link (g, i);
    }
    g->nc--;
}

unsigned tcpguard_unauth_of (const struct tcpguard *g, const char *addr)
{
    const struct conn_entry *e = find_conn (g, addr);
    return e ? e->unauth : 0;
}

enum tcpguard_admission tcpguard_admit (struct tcpguard *g,
                                        const char *addr,
                                        const char **why)
{
    struct conn_entry *e = find_conn (g, addr);
    const char *no = NULL;
    if (e && e->n >= g->lim.per_addr)
        no = "max_connections_per_user (per address on TCP)";
    else if (e && e->unauth >= g->lim.per_addr_unauth)
        no = "tcp_max_unauthenticated_per_address";
    else if (!e && g->nc >= g->lim.max_total + TCPGUARD_EVICTING_MAX)
        no = "tcp_max_connections"; /* (evictions in flight: no entry left) */
    if (no) {
        if (why)
            *why = no;
        return TCPGUARD_REFUSED;
    }
    enum tcpguard_admission ret = TCPGUARD_ADMITTED;
    if (g->total >= g->lim.max_total || g->unauth >= g->lim.max_unauth) {
        if (why)
            *why = g->total >= g->lim.max_total ? "tcp_max_connections"
                                                : "tcp_max_unauthenticated";
        ret = TCPGUARD_EVICT;
    }
    if (!e) {
        e = &g->c[g->nc++];
        snprintf (e->addr, sizeof (e->addr), "%s", addr);
        e->n = e->unauth = 0;
        hash_link (g, (int)(e - g->c));
    }
    e->n++;
    e->unauth++;
    g->total++;
    g->unauth++;
    return ret;
}

void tcpguard_authenticated (struct tcpguard *g, const char *addr)
{
    struct conn_entry *e = find_conn (g, addr);
    if (e && e->unauth)
        e->unauth--;
    if (g->unauth)
        g->unauth--;
}

void tcpguard_release (struct tcpguard *g, const char *addr, bool authed)
{
    struct conn_entry *e = find_conn (g, addr);
    if (!e || e->n == 0)
        return;
    e->n--;
    if (!authed && e->unauth)
        e->unauth--;
    if (e->n == 0)
        conn_remove (g, e);
    g->total--;
    if (!authed && g->unauth)
        g->unauth--;
}

unsigned tcpguard_open (const struct tcpguard *g)
{
    return g->total;
}

static struct fail_entry *fail_slot (struct tcpguard *g, const char *addr)
{
    struct fail_entry *idlest = &g->f[0];
    for (unsigned i = 0; i < FAIL_SLOTS; i++) {
        if (strcmp (g->f[i].addr, addr) == 0)
            return &g->f[i];
        if (g->f[i].last_ms < idlest->last_ms)
            idlest = &g->f[i];
    }
    memset (idlest, 0, sizeof (*idlest));
    snprintf (idlest->addr, sizeof (idlest->addr), "%s", addr);
    return idlest;
}

void tcpguard_auth_failed (struct tcpguard *g,
                           const char *addr,
                           int64_t now_ms,
                           struct tcpguard_verdict *v)
{
    struct fail_entry *f = fail_slot (g, addr);
    memset (v, 0, sizeof (*v));
    if (now_ms - f->last_ms > TCPGUARD_FAIL_WINDOW_MS)
        f->fails = 0;
    f->fails++;
    f->unlogged++;
    f->last_ms = now_ms;
    if (f->fails > TCPGUARD_FREE_FAILS) {
        int64_t step = (int64_t)(f->fails - TCPGUARD_FREE_FAILS) * TCPGUARD_STEP_MS;
        if (step > TCPGUARD_MAX_STEP_MS)
            step = TCPGUARD_MAX_STEP_MS;
        int64_t from = f->next_ms > now_ms ? f->next_ms : now_ms;
        if (from + step - now_ms > TCPGUARD_MAX_QUEUE_MS)
            v->cut = true;
        else
            v->answer_at_ms = f->next_ms = from + step;
    }
    v->fails = f->fails;
    /* the first failure, the first one slowed, then one a period */
    if (f->logged_ms == 0 || f->fails == TCPGUARD_FREE_FAILS + 1 ||
        now_ms - f->logged_ms >= TCPGUARD_LOG_MS) {
        v->log = true;
        v->unlogged = f->unlogged;
        f->unlogged = 0;
        f->logged_ms = now_ms;
    }
}
