/* tcpguard.c: see tcpguard.h.  Two plain arrays searched linearly: the
 * open connections' addresses (at most max_total entries, touched once
 * per accept and close) and the addresses that failed lately (FAIL_SLOTS,
 * touched once per failure; the one idle longest is recycled). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcpguard.h"

#define FAIL_SLOTS 4096

struct conn_entry {
    char addr[TCPGUARD_ADDR_MAX];
    unsigned n;
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
    struct fail_entry *f;
};

struct tcpguard *tcpguard_create (const struct tcpguard_limits *lim)
{
    struct tcpguard *g = calloc (1, sizeof (*g));
    if (!g)
        return NULL;
    g->lim = *lim;
    g->c = calloc (lim->max_total ? lim->max_total : 1, sizeof (*g->c));
    g->f = calloc (FAIL_SLOTS, sizeof (*g->f));
    if (!g->c || !g->f) {
        tcpguard_destroy (g);
        return NULL;
    }
    return g;
}

void tcpguard_destroy (struct tcpguard *g)
{
    if (g) {
        free (g->c);
        free (g->f);
        free (g);
    }
}

static struct conn_entry *find_conn (const struct tcpguard *g, const char *addr)
{
    for (unsigned i = 0; i < g->nc; i++)
        if (strcmp (g->c[i].addr, addr) == 0)
            return &g->c[i];
    return NULL;
}

bool tcpguard_admit (struct tcpguard *g, const char *addr, const char **why)
{
    struct conn_entry *e = find_conn (g, addr);
    const char *no = NULL;
    if (g->total >= g->lim.max_total)
        no = "tcp_max_connections";
    else if (g->unauth >= g->lim.max_unauth)
        no = "tcp_max_unauthenticated";
    else if (e && e->n >= g->lim.per_addr)
        no = "max_connections_per_user (per address on TCP)";
    if (no) {
        if (why)
            *why = no;
        return false;
    }
    if (!e) { /* total < max_total, so a free entry exists */
        e = &g->c[g->nc++];
        snprintf (e->addr, sizeof (e->addr), "%s", addr);
        e->n = 0;
    }
    e->n++;
    g->total++;
    g->unauth++;
    return true;
}

void tcpguard_authenticated (struct tcpguard *g)
{
    if (g->unauth)
        g->unauth--;
}

void tcpguard_release (struct tcpguard *g, const char *addr, bool authed)
{
    struct conn_entry *e = find_conn (g, addr);
    if (!e || e->n == 0)
        return;
    if (--e->n == 0)
        *e = g->c[--g->nc];
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
