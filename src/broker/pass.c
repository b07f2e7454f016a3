/* pass.c: the loop pass and its group commit (see pass.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmclient.h"
#include "http.h"
#include "log.h"
#include "monotime.h"
#include "pass.h"
#include "store.h"

struct pass_hook {
    pass_end_f end;
    pass_abort_f abort;
    void *arg;
};

struct pass {
    struct store *st;
    struct http *http;
    struct fmc *fmc;
    uint64_t count;
    bool open;          /* between pass_begin and pass_end */
    bool grouped;       /* the pass's transaction began */
    bool begin_failing; /* a pass could not begin its transaction, and none
                         * has committed a write since (logged once) */
    int64_t changes_at_begin;
    bool background_ran;    /* a background slice took this pass */
    pass_busy_f foreground; /* pass_set_foreground */
    void *foreground_arg;
    bool flush_now;
    bool commits_failing;
    int64_t commit_us; /* the commits' time since pass_take_commit_us */
    char commit_error[256];
    struct pass_hook *hooks;
    size_t nhooks, cap;
};

struct pass *pass_create (struct store *st, struct http *http, struct fmc *fmc)
{
    struct pass *p = calloc (1, sizeof (*p));
    if (!p)
        return NULL;
    p->st = st;
    p->http = http;
    p->fmc = fmc;
    return p;
}

void pass_destroy (struct pass *p)
{
    if (!p)
        return;
    free (p->hooks);
    free (p);
}

static void note_failure (struct pass *p, const struct fmb_error *e)
{
    p->commits_failing = true;
    snprintf (p->commit_error, sizeof (p->commit_error), "%s", e->text);
}

void pass_begin (struct pass *p)
{
    struct fmb_error e;
    p->count++;
    p->open = true;
    p->background_ran = false;
    p->grouped = store_begin_on_use (p->st, &e) == 0;
    p->changes_at_begin = store_changes (p->st);
    /* Only a transaction left open (a bug) keeps the pass from opening
     * its own; its writes then go into that one. */
    if (!p->grouped) {
        note_failure (p, &e);
        if (!p->begin_failing)
            fmb_log (LOG_ERR, "store: cannot begin a transaction: %s", e.text);
        p->begin_failing = true;
    }
    if (p->http)
        http_hold (p->http, p->grouped);
    if (p->fmc)
        fmc_hold (p->fmc, p->grouped);
}

/* The hooks run once each, in the order they were registered; a hook
 * registered meanwhile (the pass is closed) is not. */
static void run_hooks (struct pass *p, bool committed)
{
    struct pass_hook *hooks = p->hooks;
    size_t n = p->nhooks;
    p->hooks = NULL;
    p->nhooks = p->cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (hooks[i].end)
            hooks[i].end (hooks[i].arg, committed);
        else if (hooks[i].abort && !committed)
            hooks[i].abort (hooks[i].arg);
    }
    free (hooks);
}

bool pass_end (struct pass *p)
{
    struct fmb_error e;
    if (p->http)
        http_hold (p->http, false);
    if (p->fmc)
        fmc_hold (p->fmc, false);
    /* The pass's BEGIN failed (another writer held the lock): it wrote
     * nothing, every write in it failed and its request said so. */
    bool not_begun = p->grouped && store_tx_error (p->st);
    int64_t commit_began = fmb_monotime_us ();
    bool committed = !p->grouped || store_commit (p->st, &e) == 0;
    p->commit_us += fmb_monotime_us () - commit_began;
    if (committed && p->grouped && store_changes (p->st) != p->changes_at_begin) {
        p->commits_failing = false;
        if (p->begin_failing)
            fmb_log (LOG_NOTICE, "store: transactions begin again");
        p->begin_failing = false;
    }
    if (!committed) {
        note_failure (p, &e);
        if (!not_begun)
            fmb_log (LOG_ERR, "store: commit failed: %s", e.text);
        else if (!p->begin_failing) /* once, not every pass */
            fmb_log (LOG_ERR,
                     "store: %s (writes fail until a transaction can begin)",
                     e.text);
        p->begin_failing |= not_begun;
    }
    p->open = false;
    run_hooks (p, committed);
    /* What failed to begin changed nothing: answers go as they are (the
     * writers' errors, the readers' results), not as 503s for a change. */
    p->flush_now =
        p->http && http_release (p->http, committed || not_begun, p->commit_error) > 0;
    if (p->fmc) {
        if (!committed) /* what they would do was rolled back */
            fmc_drop_held (p->fmc);
        else
            /* Answers first (CLEANUP's 202 is not to wait for the FM
             * DELETE to be sent): the loop starts these after it sent
             * them, once a loop turn (pass_start_kept), so that a storm
             * of releases gets FMC_START_BUDGET_US of it, not one per
             * pass. */
            fmc_keep_held (p->fmc);
    }
    return committed;
}

bool pass_background_waits (int64_t *since, bool serving, int64_t now_ms)
{
    if (!serving) {
        *since = 0;
        return false;
    }
    if (!*since)
        *since = now_ms;
    if (now_ms - *since < PASS_BACKGROUND_DEFER_MAX_MS)
        return true;
    *since = 0; /* its turn, requests or not */
    return false;
}

bool pass_serving (const struct pass *p)
{
    return p->open && ((p->http && http_holds_answers (p->http)) ||
                       (p->foreground && p->foreground (p->foreground_arg)));
}

bool pass_defer_background (struct pass *p, int64_t *since, int64_t now_ms)
{
    /* One slice a pass: two would add up, in the pass and in its commit. */
    if (p->open && p->background_ran)
        return true;
    if (pass_background_waits (since, pass_serving (p), now_ms))
        return true;
    p->background_ran = p->open;
    return false;
}

void pass_set_foreground (struct pass *p, pass_busy_f fn, void *arg)
{
    p->foreground = fn;
    p->foreground_arg = arg;
}

static int add_hook (struct pass *p, struct pass_hook h)
{
    if (!p->open)
        return 0;
    if (p->nhooks == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 16;
        void *n = realloc (p->hooks, ncap * sizeof (*p->hooks));
        if (!n) {
            fmb_log (LOG_ERR, "pass: out of memory for an end-of-pass hook");
            return -1;
        }
        p->hooks = n;
        p->cap = ncap;
    }
    p->hooks[p->nhooks++] = h;
    return 0;
}

int pass_on_end (struct pass *p, pass_end_f fn, void *arg)
{
    return add_hook (p, (struct pass_hook){.end = fn, .arg = arg});
}

int pass_on_abort (struct pass *p, pass_abort_f fn, void *arg)
{
    return add_hook (p, (struct pass_hook){.abort = fn, .arg = arg});
}

void pass_forget (struct pass *p, void *arg)
{
    size_t k = 0;
    if (!p)
        return;
    for (size_t i = 0; i < p->nhooks; i++)
        if (p->hooks[i].arg != arg)
            p->hooks[k++] = p->hooks[i];
    p->nhooks = k;
}

int pass_write (struct pass *p, pass_write_f fn, void *arg, struct fmb_error *error)
{
    if (store_begin (p->st, error) < 0)
        return -1;
    if (fn (arg, error) < 0) {
        store_rollback (p->st);
        return -1;
    }
    return store_commit (p->st, error);
}

void pass_start_kept (struct pass *p)
{
    if (p->fmc)
        fmc_start_held (p->fmc);
}

bool pass_open (const struct pass *p)
{
    return p->open;
}

uint64_t pass_count (const struct pass *p)
{
    return p->count;
}

bool pass_flush_now (const struct pass *p)
{
    return p->flush_now;
}

int64_t pass_take_commit_us (struct pass *p)
{
    int64_t us = p->commit_us;
    p->commit_us = 0;
    return us;
}

bool pass_commits_failing (const struct pass *p, const char **why)
{
    /* this pass's transaction could not begin: it will fail too */
    const char *now = p->open ? store_tx_error (p->st) : NULL;
    if (why)
        *why = now ? now : p->commit_error;
    return now || p->commits_failing;
}
