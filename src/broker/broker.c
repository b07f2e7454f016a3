/* broker.c: roles, events and their long-poll readers, metrics, status. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "broker.h"
#include "log.h"
#include "monotime.h"
#include "nsscache.h"

int64_t now_mono (void)
{
    return fmb_monotime_ms ();
}

int64_t now_wall (void)
{
    return fmb_realtime_ms ();
}

const char *broker_local_job (struct broker *b, const char *fm_job_id)
{
    size_t n = strlen (b->cfg.cluster_name);
    if (strncmp (fm_job_id, b->cfg.cluster_name, n) != 0 || fm_job_id[n] != '-')
        return NULL;
    return fm_job_id + n + 1;
}

void broker_note_stall (struct broker *b, int64_t us)
{
    struct metrics *m = &b->metrics;
    int64_t now = now_mono ();
    if (now - m->stall_window >= STALL_WINDOW_MS) {
        /* a window with no pass at all leaves nothing to remember */
        m->stall_us[1] =
            now - m->stall_window < 2 * STALL_WINDOW_MS ? m->stall_us[0] : 0;
        m->stall_us[0] = 0;
        m->stall_window = now;
    }
    if (us > m->stall_us[0])
        m->stall_us[0] = us;
}

/* ---- roles --------------------------------------------------------- */

/* A name missing from the built-in default list (e.g. 'flux' on a Slurm
 * site) is expected and logged at debug level only; one the site wrote
 * itself is a warning. */
static int resolve_list (
    const char *list, bool groups, unsigned *ids, int *n, const char *key)
{
    int missing_level =
        strcmp (key, "rm_users") == 0 && strcmp (list, FMB_RM_USERS_DEFAULT) == 0
            ? LOG_DEBUG
            : LOG_WARNING;
    char buf[FMB_CFG_LIST_MAX];
    char *save = NULL;
    snprintf (buf, sizeof (buf), "%s", list);
    *n = 0;
    for (char *name = strtok_r (buf, ",", &save); name;
         name = strtok_r (NULL, ",", &save)) {
        char *end;
        unsigned long v = strtoul (name, &end, 10);
        if (*end == '\0') {
            ids[(*n)++] = (unsigned)v;
        } else if (groups) {
            struct group *g = getgrnam (name);
            if (g)
                ids[(*n)++] = g->gr_gid;
            else
                fmb_log (missing_level, "[api] %s: no group '%s', ignoring", key, name);
        } else {
            struct passwd *p = getpwnam (name);
            if (p)
                ids[(*n)++] = p->pw_uid;
            else
                fmb_log (missing_level, "[api] %s: no user '%s', ignoring", key, name);
        }
        if (*n == MAX_ROLE_IDS)
            break;
    }
    return 0;
}

int broker_resolve_roles (struct broker *b)
{
    resolve_list (b->cfg.rm_users, false, (unsigned *)b->rm_uids, &b->n_rm, "rm_users");
    resolve_list (b->cfg.admin_users,
                  false,
                  (unsigned *)b->admin_uids,
                  &b->n_admin,
                  "admin_users");
    resolve_list (b->cfg.admin_groups,
                  true,
                  (unsigned *)b->admin_gids,
                  &b->n_admin_gids,
                  "admin_groups");
    return 0;
}

static bool in_groups (struct broker *b, uid_t uid, gid_t gid)
{
    for (int i = 0; i < b->n_admin_gids; i++)
        if (b->admin_gids[i] == gid)
            return true;
    if (b->n_admin_gids == 0)
        return false;
    /* asked at every accept: the name service (maybe LDAP) is asked at
     * most once per NSS_CACHE_MS and user */
    return nss_in_groups (uid, gid, b->admin_gids, b->n_admin_gids, now_mono ());
}

unsigned broker_roles_of (struct broker *b, uid_t uid, gid_t gid)
{
    unsigned roles = 0;
    for (int i = 0; i < b->n_rm; i++)
        if (b->rm_uids[i] == uid)
            roles |= ROLE_RM;
    for (int i = 0; i < b->n_admin; i++)
        if (b->admin_uids[i] == uid)
            roles |= ROLE_ADMIN;
    if (!(roles & ROLE_ADMIN) && in_groups (b, uid, gid))
        roles |= ROLE_ADMIN;
    return roles;
}

bool broker_job_token_matches (struct broker *b, const char *job, const char *token)
{
    struct store_job *j;
    struct fmb_error e;
    bool ok = false;
    if (store_job_get (b->st, job, &j, &e) < 0)
        return false;
    /* A released job's token opens nothing any more. */
    if (j->token && j->state != STORE_JOB_RELEASED) {
        size_t a = strlen (j->token), t = strlen (token);
        /* constant time in the token's content; lengths are not secret */
        ok = a == t && CRYPTO_memcmp (j->token, token, a) == 0;
    }
    store_job_free (j);
    return ok;
}

void broker_count_request (struct broker *b, int status)
{
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        b->metrics.http_by_class[cls]++;
}

void broker_forget_request (struct broker *b, struct http_req *req)
{
    struct waiter *w = http_wait (req);
    waitq_remove (w);
    pass_forget (b->pass, w);
}

void broker_log_store_error (struct broker *b,
                             const char *what,
                             const struct fmb_error *e)
{
    (void)b;
    fmb_log (LOG_ERR, "%s: store: %s", what, e->text);
}

/* ---- damaged tokens ------------------------------------------------ */

void broker_token_damaged (void *arg, const char *job, const char *why)
{
    struct broker *b = arg;
    unsigned kept = b->n_damaged_seen < 64 ? b->n_damaged_seen : 64;
    for (unsigned i = 0; i < kept; i++)
        if (strcmp (b->damaged_seen[i], job) == 0)
            return;
    snprintf (b->damaged_seen[b->n_damaged_seen++ % 64],
              sizeof (b->damaged_seen[0]),
              "%s",
              job);
    /* Never the token (it did not decrypt anyway), nor the blob. */
    fmb_log (LOG_ERR,
             "job %s: its stored session token does not decrypt (%s); the job "
             "goes on without it",
             job,
             why);
    if (b->n_damaged_new < 16)
        snprintf (
            b->damaged_new[b->n_damaged_new++], sizeof (b->damaged_new[0]), "%s", job);
    timer_wake (b->t_damage, 0);
}

/* The pass that wrote the damage events ended: forget them once they
 * are durable; if not, they are written again in the next pass. */
static void damage_reported (void *arg, bool committed)
{
    struct broker *b = arg;
    int n = b->n_damaged_reporting;
    b->n_damaged_reporting = 0;
    if (!committed) {
        timer_wake (b->t_damage, 1000);
        return;
    }
    memmove (b->damaged_new,
             b->damaged_new + n,
             (size_t)(b->n_damaged_new - n) * sizeof (b->damaged_new[0]));
    b->n_damaged_new -= n;
}

/* Outside any read of the jobs table: the events are written in the
 * pass's transaction. */
void broker_report_damage (struct broker *b)
{
    if (b->n_damaged_new == 0 || b->n_damaged_reporting)
        return;
    for (int i = 0; i < b->n_damaged_new; i++) {
        struct fmb_error e;
        if (broker_event (
                b,
                "token_damaged",
                b->damaged_new[i],
                json_pack (
                    "{s:s}", "detail", "the stored session token does not decrypt"),
                &e) < 0)
            broker_log_store_error (b, "token_damaged event", &e);
    }
    b->n_damaged_reporting = b->n_damaged_new;
    if (!pass_open (b->pass) || pass_on_end (b->pass, damage_reported, b) < 0)
        damage_reported (b, true);
}

/* ---- events -------------------------------------------------------- */

int broker_event (struct broker *b,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error)
{
    char *text = detail ? json_dumps (detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref (detail);
    int rc = store_event_append (b->st, type, job, text, NULL, error);
    free (text);
    if (rc == 0) {
        fmb_log (LOG_INFO, "event %s%s%s", type, job ? " job " : "", job ? job : "");
        timer_wake (b->t_events, 0); /* long-poll readers have news */
    }
    return rc;
}

struct event_collect {
    json_t *list;
    int64_t last;
};

static int collect_event (const struct store_event *ev, void *arg)
{
    struct event_collect *c = arg;
    json_t *detail = json_loads (ev->detail, 0, NULL);
    json_t *o = json_pack ("{s:I, s:I, s:s, s:o}",
                           "seq",
                           (json_int_t)ev->seq,
                           "time_ms",
                           (json_int_t)ev->at_ms,
                           "type",
                           ev->type,
                           "detail",
                           detail ? detail : json_object ());
    if (ev->job_id)
        json_object_set_new (o, "job", json_string (ev->job_id));
    json_array_append_new (c->list, o);
    c->last = ev->seq;
    return 0;
}

/* The events after 'after' as the API shows them, or NULL on error. */
static json_t *events_after (struct broker *b, int64_t after, unsigned limit, bool *any)
{
    struct event_collect c = {json_array (), after};
    struct fmb_error e;
    if (store_event_list (b->st, after, limit, collect_event, &c, &e) < 0) {
        json_decref (c.list);
        broker_log_store_error (b, "events", &e);
        return NULL;
    }
    /* A reader whose cursor is older than first_seq - 1 missed events that
     * [broker] retain_days pruned. */
    int64_t first = 0;
    if (store_event_first (b->st, &first, &e) < 0)
        broker_log_store_error (b, "events", &e);
    *any = json_array_size (c.list) > 0;
    return json_pack ("{s:o, s:I, s:I}",
                      "events",
                      c.list,
                      "last_seq",
                      (json_int_t)c.last,
                      "first_seq",
                      (json_int_t)first);
}

struct events_wake {
    struct broker *b;
    int64_t last, now;
    bool all;
};

static void event_reply (struct waiter *w, void *arg)
{
    struct events_wake *ew = arg;
    if (!ew->all && ew->last <= w->after && ew->now < w->deadline_ms)
        return;
    waitq_remove (w);
    bool any;
    json_t *o = events_after (ew->b, w->after, (unsigned)w->key, &any);
    if (o)
        http_reply (w->req, 200, o);
    else
        http_reply_problem (w->req, 503, "event log unreadable");
}

void broker_events_wake (struct broker *b, bool all)
{
    struct events_wake ew = {.b = b, .all = all};
    struct fmb_error e;
    if (waitq_empty (&b->event_waiters) || store_event_last (b->st, &ew.last, &e) < 0)
        return;
    ew.now = now_mono ();
    waitq_each (&b->event_waiters, event_reply, &ew);
}

void broker_events_wait (struct broker *b,
                         struct http_req *req,
                         int64_t after,
                         unsigned limit,
                         unsigned wait_s)
{
    struct waiter *w = http_wait (req);
    w->after = after;
    w->key = (int64_t)limit;
    w->deadline_ms = now_mono () + (int64_t)wait_s * 1000;
    waitq_add (&b->event_waiters, w);
    http_suspend (req);
    /* Answers now if there is news or no wait was asked for. */
    broker_events_wake (b, false);
    timer_wake (b->t_events, (int64_t)wait_s * 1000);
}

static int64_t events_timer (void *arg, int64_t now)
{
    struct broker *b = arg;
    broker_events_wake (b, false);
    return waitq_next_deadline_ms (&b->event_waiters, now);
}

static int64_t damage_timer (void *arg, int64_t now)
{
    (void)now;
    broker_report_damage (arg);
    return TIMER_IDLE;
}

void broker_start (struct broker *b)
{
    b->t_damage = timer_add (b->timers, "damage reports", 0, damage_timer, b);
    b->t_events = timer_add (b->timers, "event readers", TIMER_IDLE, events_timer, b);
}

/* ---- metrics ------------------------------------------------------- */

static const char *const fm_op_names[FM_OPS] = {
    "get", "create", "patch", "delete", "list", "token", "login"};
static const unsigned lat_bounds_ms[LAT_BUCKETS] = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

void broker_observe_fm (const struct fmc_result *res, void *arg)
{
    struct broker *b = arg;
    int op;
    for (op = 0; op < FM_OPS; op++)
        if (strcmp (fm_op_names[op], res->op) == 0)
            break;
    if (op == FM_OPS)
        return;
    if ((unsigned)res->status < FM_RESULTS)
        b->metrics.fm_calls[op][res->status]++;
    int k;
    for (k = 0; k < LAT_BUCKETS; k++)
        if (res->elapsed_ms <= lat_bounds_ms[k])
            break;
    b->metrics.fm_latency[op][k]++;
    b->metrics.fm_latency_sum[op] += res->elapsed_ms / 1000.0;
}

static int count_job_state (struct broker *b, enum store_job_state s, unsigned *n)
{
    struct fmb_error e;
    if (store_job_count (b->st, s, n, &e) < 0) {
        *n = 0;
        return -1;
    }
    return 0;
}

char *broker_metrics_text (struct broker *b)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    struct fmb_error e;
    if (!f)
        return NULL;
    fprintf (f,
             "# HELP fmbroker_jobs Jobs in the store by state.\n# TYPE fmbroker_jobs "
             "gauge\n");
    for (int s = STORE_JOB_ACTIVE; s <= STORE_JOB_LOST; s++) {
        unsigned n;
        count_job_state (b, s, &n);
        fprintf (f, "fmbroker_jobs{state=\"%s\"} %u\n", store_job_state_name (s), n);
    }
    unsigned depth = 0, held = 0, quarantined = 0;
    store_outbox_depth (b->st, &depth, &e);
    store_vni_counts (b->st, &held, &quarantined, &e);
    fprintf (f, "# HELP fmbroker_outbox_depth FM operations waiting in the outbox.\n");
    fprintf (
        f, "# TYPE fmbroker_outbox_depth gauge\nfmbroker_outbox_depth %u\n", depth);
    fprintf (
        f,
        "# HELP fmbroker_vnis VNIs by state; the pool has fmbroker_vni_pool_size.\n");
    fprintf (f, "# TYPE fmbroker_vnis gauge\n");
    fprintf (
        f,
        "fmbroker_vnis{state=\"held\"} %u\nfmbroker_vnis{state=\"quarantined\"} %u\n",
        held,
        quarantined);
    fprintf (f,
             "# HELP fmbroker_vni_pool_size VNIs in the configured pool.\n"
             "# TYPE fmbroker_vni_pool_size gauge\nfmbroker_vni_pool_size %u\n",
             b->cfg.vni_max - b->cfg.vni_min + 1);
    unsigned rjobs = 0, addrs = 0;
    store_hwcoll_usage (b->st, &rjobs, &addrs, &e);
    fprintf (f,
             "# HELP fmbroker_mcast_addresses_reserved Multicast addresses reserved at "
             "the FM for live jobs.\n");
    fprintf (f,
             "# TYPE fmbroker_mcast_addresses_reserved "
             "gauge\nfmbroker_mcast_addresses_reserved %u\n",
             addrs);
    fprintf (
        f,
        "# HELP fmbroker_mcast_reservations Live jobs holding a multicast "
        "reservation at the FM.\n"
        "# TYPE fmbroker_mcast_reservations gauge\nfmbroker_mcast_reservations %u\n",
        rjobs);
    fprintf (f, "# HELP fmbroker_fm_up 1 when the fabric manager session is up.\n");
    fprintf (f,
             "# TYPE fmbroker_fm_up gauge\nfmbroker_fm_up %d\n",
             fmsession_state (b->fms) == FM_UP);
    fprintf (f,
             "# HELP fmbroker_fm_requests_total FM HTTP calls by call and result (each "
             "call of a reservation counts).\n");
    fprintf (f, "# TYPE fmbroker_fm_requests_total counter\n");
    for (int op = 0; op < FM_OPS; op++)
        for (int r = 0; r < FM_RESULTS; r++)
            if (b->metrics.fm_calls[op][r])
                fprintf (f,
                         "fmbroker_fm_requests_total{call=\"%s\",result=\"%s\"} %lu\n",
                         fm_op_names[op],
                         fmc_status_name ((enum fmc_status)r),
                         b->metrics.fm_calls[op][r]);
    fprintf (f, "# HELP fmbroker_fm_request_duration_seconds FM call latency.\n");
    fprintf (f, "# TYPE fmbroker_fm_request_duration_seconds histogram\n");
    for (int op = 0; op < FM_OPS; op++) {
        unsigned long cum = 0;
        for (int k = 0; k <= LAT_BUCKETS; k++) {
            cum += b->metrics.fm_latency[op][k];
            if (k < LAT_BUCKETS)
                fprintf (f,
                         "fmbroker_fm_request_duration_seconds_bucket{call=\"%s\",le="
                         "\"%g\"} %lu\n",
                         fm_op_names[op],
                         lat_bounds_ms[k] / 1000.0,
                         cum);
            else
                fprintf (f,
                         "fmbroker_fm_request_duration_seconds_bucket{call=\"%s\",le="
                         "\"+Inf\"} %lu\n",
                         fm_op_names[op],
                         cum);
        }
        fprintf (f,
                 "fmbroker_fm_request_duration_seconds_sum{call=\"%s\"} %g\n",
                 fm_op_names[op],
                 b->metrics.fm_latency_sum[op]);
        fprintf (f,
                 "fmbroker_fm_request_duration_seconds_count{call=\"%s\"} %lu\n",
                 fm_op_names[op],
                 cum);
    }
    fprintf (f,
             "# HELP fmbroker_http_responses_total API responses by status class.\n"
             "# TYPE fmbroker_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        fprintf (f,
                 "fmbroker_http_responses_total{code=\"%dxx\"} %lu\n",
                 c,
                 b->metrics.http_by_class[c]);
    fprintf (f,
             "# HELP fmbroker_reconcile_runs_total Reconciliations with the FM's "
             "job list.\n"
             "# TYPE fmbroker_reconcile_runs_total "
             "counter\nfmbroker_reconcile_runs_total %lu\n",
             b->metrics.reconcile_runs);
    fprintf (f,
             "# HELP fmbroker_orphans_released_total FM reservations of this cluster "
             "released because no live job owned them.\n"
             "# TYPE fmbroker_orphans_released_total "
             "counter\nfmbroker_orphans_released_total %lu\n",
             b->metrics.orphans_released);
    fprintf (f,
             "# HELP fmbroker_foreign_reservations FM reservations with this "
             "cluster's prefix that the broker has no record of creating.\n"
             "# TYPE fmbroker_foreign_reservations gauge\n"
             "fmbroker_foreign_reservations %lu\n"
             "# HELP fmbroker_foreign_reaped_total Foreign reservations deleted.\n"
             "# TYPE fmbroker_foreign_reaped_total counter\n"
             "fmbroker_foreign_reaped_total %lu\n",
             b->metrics.foreign_reservations,
             b->metrics.foreign_reaped);
    fprintf (f,
             "# HELP fmbroker_reservations_lost_total Active jobs whose FM "
             "reservation vanished.\n"
             "# TYPE fmbroker_reservations_lost_total "
             "counter\nfmbroker_reservations_lost_total %lu\n",
             b->metrics.reservations_lost);
    fprintf (f,
             "# HELP fmbroker_pruned_total History deleted by [broker] retain_days.\n"
             "# TYPE fmbroker_pruned_total counter\n"
             "fmbroker_pruned_total{what=\"jobs\"} %lu\n"
             "fmbroker_pruned_total{what=\"events\"} %lu\n",
             b->metrics.pruned_jobs,
             b->metrics.pruned_events);
    int64_t stall = b->metrics.stall_us[0] > b->metrics.stall_us[1]
                        ? b->metrics.stall_us[0]
                        : b->metrics.stall_us[1];
    fprintf (f,
             "# HELP fmbroker_prune_slices_total Retention slices that deleted "
             "something.\n"
             "# TYPE fmbroker_prune_slices_total counter\n"
             "fmbroker_prune_slices_total %lu\n"
             "# HELP fmbroker_reconcile_slices_total Slices of matching the FM's "
             "listing.\n"
             "# TYPE fmbroker_reconcile_slices_total counter\n"
             "fmbroker_reconcile_slices_total %lu\n"
             "# HELP fmbroker_loop_stall_seconds Longest single pass of the broker's "
             "loop over the last one to two minutes.\n"
             "# TYPE fmbroker_loop_stall_seconds gauge\n"
             "fmbroker_loop_stall_seconds %.6f\n",
             b->metrics.prune_slices,
             b->metrics.reconcile_slices,
             (double)stall / 1e6);
    fprintf (f,
             "# HELP fmbroker_build_info The running fmbrokerd's version (always 1).\n"
             "# TYPE fmbroker_build_info gauge\n"
             "fmbroker_build_info{version=\"%s\"} 1\n",
             FMB_VERSION);
    fclose (f);
    return buf;
}

json_t *broker_status (struct broker *b)
{
    struct fmb_error e;
    unsigned counts[4] = {0}, depth = 0, held = 0, quarantined = 0, cursor = 0,
             rjobs = 0, addrs = 0;
    int64_t last = 0, next = 0;
    for (int s = STORE_JOB_ACTIVE; s <= STORE_JOB_LOST; s++)
        count_job_state (b, s, &counts[s]);
    store_outbox_depth (b->st, &depth, &e);
    bool have_next = store_outbox_next_ms (b->st, &next, &e) == 0;
    store_vni_counts (b->st, &held, &quarantined, &e);
    store_vni_cursor (b->st, &cursor, &e);
    store_event_last (b->st, &last, &e);
    store_hwcoll_usage (b->st, &rjobs, &addrs, &e);
    json_t *fm = json_pack ("{s:b, s:s, s:I}",
                            "configured",
                            b->fmc != NULL,
                            "state",
                            fm_state_name (fmsession_state (b->fms)),
                            "since_ms",
                            (json_int_t)fmsession_since (b->fms));
    if (b->fmc)
        json_object_set_new (fm, "url", json_string (b->cfg.fm_url));
    if (fmsession_state (b->fms) == FM_DOWN)
        json_object_set_new (fm, "last_error", json_string (fmsession_error (b->fms)));
    json_t *outbox = json_pack ("{s:i}", "depth", (int)depth);
    json_t *lock = json_pack ("{s:s, s:s, s:I, s:I}",
                              "file",
                              b->lock.path,
                              "host",
                              b->lock.host,
                              "pid",
                              (json_int_t)b->lock.pid,
                              "since_ms",
                              (json_int_t)b->lock.since_ms);
    if (have_next)
        json_object_set_new (outbox, "next_due_ms", json_integer (next));
    return json_pack (
        "{s:s, s:s, s:I, s:o, s:o, s:o, s:{s:i, s:i, s:i, s:i},"
        " s:{s:i, s:i, s:i, s:i, s:i}, s:{s:i, s:i, s:i, s:i}, s:{s:I}}",
        "version",
        FMB_VERSION,
        "cluster",
        b->cfg.cluster_name,
        "uptime_s",
        (json_int_t)((now_wall () - b->started_ms) / 1000),
        "fabric_manager",
        fm,
        "state_lock",
        lock,
        "outbox",
        outbox,
        "jobs",
        "active",
        (int)counts[STORE_JOB_ACTIVE],
        "releasing",
        (int)counts[STORE_JOB_RELEASING],
        "released",
        (int)counts[STORE_JOB_RELEASED],
        "lost",
        (int)counts[STORE_JOB_LOST],
        "vnis",
        "pool_min",
        (int)b->cfg.vni_min,
        "pool_max",
        (int)b->cfg.vni_max,
        "held",
        (int)held,
        "quarantined",
        (int)quarantined,
        "cursor",
        (int)cursor,
        "hwcoll",
        "reservations",
        (int)rjobs,
        "addresses_reserved",
        (int)addrs,
        "addrs_per_job",
        (int)fmb_config_mcast_limit (&b->cfg),
        "min_nodes",
        (int)b->cfg.hwcoll_min_nodes,
        "events",
        "last_seq",
        (json_int_t)last);
}
