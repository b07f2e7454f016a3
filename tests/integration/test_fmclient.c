/* test_fmclient.c: the FM client against a running mockfm over loopback:
 * every operation in every auth mode, TLS and mTLS, token expiry and
 * refresh, concurrency, the classification of every kind of failure, and
 * the application (libfabric) side of the mock. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fmclient.h"
#include "monotime.h"
#include "mockfm_util.h"
#include "testutil.h"

struct outcome {
    int done;
    enum fmc_status status;
    long http;
    char error[256];
    char token[128];
    long limit;
    bool created;
    bool unsent;
    unsigned elapsed;
    size_t njobs;
    char jobs[8][64];
};

static void on_done (const struct fmc_result *r, void *arg)
{
    struct outcome *o = arg;
    o->done++;
    o->status = r->status;
    o->http = r->http_status;
    snprintf (o->error, sizeof (o->error), "%s", r->error);
    snprintf (
        o->token, sizeof (o->token), "%s", r->session_token ? r->session_token : "");
    o->limit = r->mcast_limit;
    o->created = r->created;
    o->unsent = r->unsent;
    o->elapsed = r->elapsed_ms;
    o->njobs = r->njob_ids;
    for (size_t i = 0; i < r->njob_ids && i < 8; i++)
        snprintf (o->jobs[i], sizeof (o->jobs[i]), "%s", r->job_ids[i]);
}

/* Run one call to completion; 'o' gets the outcome. */
#define RUN(fmc, o, call)                             \
    do {                                              \
        struct fmb_error e_;                          \
        memset (&(o), 0, sizeof (o));                 \
        if ((call) < 0)                               \
            fail_msg ("%s: %s", #call, e_.text);      \
        assert_int_equal (fmc_run ((fmc), 20000), 0); \
        assert_int_equal ((o).done, 1);               \
    } while (0)

#define EXPECT(o, st)                                   \
    do {                                                \
        if ((o).status != (st))                         \
            fail_msg ("got %s (http %ld: %s), want %s", \
                      fmc_status_name ((o).status),     \
                      (o).http,                         \
                      (o).error,                        \
                      fmc_status_name (st));            \
    } while (0)

struct fx {
    char *dir;
    char *auth;
    struct mockfm m;
    struct fmc *fmc;
    struct fmc_config cfg;
};

static int setup (void **state)
{
    struct fx *fx = calloc (1, sizeof (*fx));
    fx->dir = tu_mkdtemp ();
    fx->auth = tu_path (fx->dir, "auth");
    mkdir (fx->auth, 0700);
    *state = fx;
    return 0;
}

static int teardown (void **state)
{
    struct fx *fx = *state;
    fmc_destroy (fx->fmc);
    mockfm_stop (&fx->m);
    free (fx->auth);
    tu_rmtree (fx->dir);
    free (fx);
    return 0;
}

static void write_cred (struct fx *fx,
                        const char *name,
                        const char *text,
                        unsigned mode)
{
    char *p = tu_path (fx->auth, name);
    tu_write (p, text, mode);
    free (p);
}

/* Start mockfm with 'auth' and make an fmc that matches it. */
static void start (struct fx *fx, enum fmb_auth auth, const char *const *extra)
{
    const char *args[32];
    int n = 0;
    static const char *names[] = {"oauth", "basic", "none"};
    args[n++] = "--auth";
    args[n++] = names[auth];
    if (auth != FMB_AUTH_NONE) {
        args[n++] = "--auth-dir";
        args[n++] = fx->auth;
    }
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    write_cred (fx, "client-id", "slurm-ctld\n", 0644);
    write_cred (fx, "client-secret", "s3cret-Value\n", 0600);
    write_cred (fx, "passwd", "cxi-pass\n", 0600);
    bool tls = false;
    for (int i = 0; extra && extra[i]; i++)
        if (strcmp (extra[i], "--tls-cert") == 0)
            tls = true;
    mockfm_start (&fx->m, fx->dir, tls, args);
    char endpoint[256];
    snprintf (endpoint, sizeof (endpoint), "%s/oauth/token\n", fx->m.url);
    write_cred (fx, "endpoint", endpoint, 0644);
    fx->cfg = (struct fmc_config){
        .url = fx->m.url,
        .auth = auth,
        .auth_dir = fx->auth,
        .timeout_ms = 5000,
        .max_connections = 16,
    };
}

static void make_client (struct fx *fx)
{
    struct fmb_error e;
    fmc_destroy (fx->fmc);
    fx->fmc = NULL;
    if (fmc_create (&fx->cfg, &fx->fmc, &e) < 0)
        fail_msg ("fmc_create: %s", e.text);
}

static int state_int (struct mockfm *m, const char *key)
{
    json_t *s = mockfm_state (m);
    int v = (int)json_integer_value (json_object_get (s, key));
    json_decref (s);
    return v;
}

/* ---- every operation, every auth mode ------------------------------ */

static void every_operation (struct fx *fx)
{
    struct outcome o, o2;
    struct fmc *c = fx->fmc;
    RUN (c, o, fmc_job_list (c, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_int_equal (o.njobs, 0);
    RUN (c, o, fmc_job_get (c, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    RUN (c,
         o,
         fmc_job_reserve (c, "c1-1", 4, 2000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_true (o.created);
    assert_true (strlen (o.token) >= 32); /* at least 128 bits */
    assert_int_equal (o.limit, 4);
    /* idempotent: the second reserve finds it */
    RUN (
        c,
        o2,
        fmc_job_reserve (c, "c1-1", 4, 2000, FMC_RESERVE_GET_FIRST, on_done, &o2, &e_));
    EXPECT (o2, FMC_OK);
    assert_false (o2.created);
    assert_string_equal (o.token, o2.token);
    RUN (c, o2, fmc_job_get (c, "c1-1", on_done, &o2, &e_));
    EXPECT (o2, FMC_OK);
    assert_string_equal (o.token, o2.token);
    RUN (c, o, fmc_job_create (c, "c1-1", 4, on_done, &o, &e_));
    EXPECT (o, FMC_RETRYABLE); /* 409 */
    assert_int_equal (o.http, 409);
    RUN (c, o, fmc_job_delete_step (c, "c1-1", "0", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    RUN (c, o, fmc_job_delete_step (c, "c1-2", "0", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    RUN (c, o, fmc_job_create (c, "c1-2", 0, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    RUN (c, o, fmc_job_list (c, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_int_equal (o.njobs, 2);
    assert_true (strcmp (o.jobs[0], "c1-1") == 0 || strcmp (o.jobs[1], "c1-1") == 0);
    RUN (c, o, fmc_job_delete (c, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    RUN (c, o, fmc_job_delete (c, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    json_t *s = mockfm_state (&fx->m);
    assert_null (json_object_get (json_object_get (s, "jobs"), "c1-1"));
    assert_non_null (json_object_get (json_object_get (s, "jobs"), "c1-2"));
    json_decref (s);
    /* ids that would need escaping never reach the wire */
    struct fmb_error e;
    assert_int_equal (fmc_job_get (c, "../x", on_done, &o, &e), -1);
    assert_int_equal (errno, EINVAL);
}

static void every_operation_without_auth (void **state)
{
    struct fx *fx = *state;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    every_operation (fx);
}

static void every_operation_with_basic_auth (void **state)
{
    struct fx *fx = *state;
    start (fx, FMB_AUTH_BASIC, NULL);
    make_client (fx);
    every_operation (fx);
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-1 401"), 0);
}

static void every_operation_with_oauth (void **state)
{
    struct fx *fx = *state;
    start (fx, FMB_AUTH_OAUTH, NULL);
    make_client (fx);
    every_operation (fx);
    /* one token served every call */
    assert_int_equal (fmc_token_fetches (fx->fmc), 1);
    assert_int_equal (state_int (&fx->m, "token_grants"), 1);
    assert_int_equal (mockfm_log_count (&fx->m, "POST /oauth/token 200"), 1);
}

static void wrong_credentials_are_unauthorized (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    start (fx, FMB_AUTH_OAUTH, NULL);
    write_cred (fx, "client-secret", "wrong\n", 0600);
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_UNAUTHORIZED);
    assert_non_null (strstr (o.error, "token endpoint answered 401"));
    assert_null (strstr (o.error, "wrong"));
    /* rotated credentials are picked up at the next fetch */
    write_cred (fx, "client-secret", "s3cret-Value\n", 0600);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    mockfm_stop (&fx->m);

    start (fx, FMB_AUTH_BASIC, NULL);
    write_cred (fx, "passwd", "nope\n", 0600);
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_UNAUTHORIZED);
    assert_int_equal (o.http, 401);
}

static void secret_files_others_can_read_are_refused (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct fmc *c = NULL;
    start (fx, FMB_AUTH_OAUTH, NULL);
    write_cred (fx, "client-secret", "s3cret-Value\n", 0644);
    assert_int_equal (fmc_create (&fx->cfg, &c, &e), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (
        strstr (e.text, "client-secret: mode 0644 lets group or others read it"));
    fx->cfg.auth = FMB_AUTH_BASIC;
    write_cred (fx, "passwd", "pw\n", 0640);
    assert_int_equal (fmc_create (&fx->cfg, &c, &e), -1);
    assert_non_null (strstr (e.text, "passwd: mode 0640"));
    char *missing = tu_path (fx->dir, "nowhere");
    fx->cfg.auth_dir = missing;
    assert_int_equal (fmc_create (&fx->cfg, &c, &e), -1);
    assert_int_equal (errno, ENOENT);
    free (missing);
    assert_null (c);
}

/* ---- TLS ----------------------------------------------------------- */

static char *certs (struct fx *fx)
{
    char cmd[1024];
    char *dir = tu_path (fx->dir, "certs");
    snprintf (cmd,
              sizeof (cmd),
              "sh %s/tests/integration/make-certs.sh %s",
              getenv ("FMB_SRC"),
              dir);
    assert_int_equal (system (cmd), 0);
    return dir;
}

static void tls_is_verified_by_default (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    char *d = certs (fx);
    char *cert = tu_path (d, "server.pem"), *key = tu_path (d, "server.key");
    char *ca = tu_path (d, "ca.pem"), *other = tu_path (d, "other-ca.pem");
    const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    start (fx, FMB_AUTH_OAUTH, args);
    /* the system store does not know our CA */
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    assert_int_not_equal (o.status, FMC_OK);
    assert_int_not_equal (o.status, FMC_NOT_FOUND);
    fx->cfg.ca_file = other;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    assert_int_not_equal (o.status, FMC_OK);
    assert_int_not_equal (o.status, FMC_NOT_FOUND);
    fx->cfg.ca_file = ca;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-1", 2, 5000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    fx->cfg.ca_file = NULL;
    fx->cfg.insecure = true;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    free (cert);
    free (key);
    free (ca);
    free (other);
    free (d);
}

static void mtls_needs_the_client_certificate (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    char *d = certs (fx);
    char *cert = tu_path (d, "server.pem"), *key = tu_path (d, "server.key");
    char *ca = tu_path (d, "ca.pem");
    char *ccert = tu_path (d, "client.pem"), *ckey = tu_path (d, "client.key");
    const char *args[] = {
        "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca, NULL};
    start (fx, FMB_AUTH_NONE, args);
    fx->cfg.ca_file = ca;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    assert_int_not_equal (o.status, FMC_OK);
    assert_int_not_equal (o.status, FMC_NOT_FOUND);
    fx->cfg.mtls_cert = ccert;
    fx->cfg.mtls_key = ckey;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    free (cert);
    free (key);
    free (ca);
    free (ccert);
    free (ckey);
    free (d);
}

/* ---- tokens -------------------------------------------------------- */

static void token_expiry_mid_run_fails_no_operation (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    start (fx, FMB_AUTH_OAUTH, NULL);
    make_client (fx);
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-5", 2, 2000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    mockfm_ctl (&fx->m, "POST", "/_mock/expire-tokens", "");
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-5", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    /* exactly one 401, exactly one refresh */
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-5 401"), 1);
    assert_int_equal (fmc_token_fetches (fx->fmc), 2);
    assert_int_equal (state_int (&fx->m, "token_grants"), 2);
}

static void many_calls_meeting_one_expired_token_refresh_once (void **state)
{
    struct fx *fx = *state;
    struct outcome o[20];
    struct fmb_error e;
    start (fx, FMB_AUTH_OAUTH, NULL);
    make_client (fx);
    RUN (fx->fmc, o[0], fmc_job_get (fx->fmc, "c1-5", on_done, &o[0], &e_));
    mockfm_ctl (&fx->m, "POST", "/_mock/expire-tokens", "");
    memset (o, 0, sizeof (o));
    for (int i = 0; i < 20; i++)
        assert_int_equal (fmc_job_get (fx->fmc, "c1-5", on_done, &o[i], &e), 0);
    assert_int_equal (fmc_run (fx->fmc, 20000), 0);
    for (int i = 0; i < 20; i++)
        EXPECT (o[i], FMC_NOT_FOUND);
    assert_int_equal (fmc_token_fetches (fx->fmc), 2);
}

static void token_is_refreshed_before_it_expires (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    const char *args[] = {"--token-lifetime", "2", NULL};
    start (fx, FMB_AUTH_OAUTH, args);
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    /* Past 90% of the 2 s lifetime, not past its end: a new token is
     * fetched before the call, so the FM never sees a stale one. */
    struct timespec ts = {1, 900 * 1000000L};
    nanosleep (&ts, NULL);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    assert_int_equal (fmc_token_fetches (fx->fmc), 2);
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-1 401"), 0);
}

static void persistent_401_stops_after_one_refresh (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    start (fx, FMB_AUTH_OAUTH, NULL);
    make_client (fx);
    mockfm_ctl (
        &fx->m, "POST", "/_mock/faults", "GET /fabric/collectives/jobs/* 401\n");
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_UNAUTHORIZED);
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-1 401"), 2);
    assert_int_equal (fmc_token_fetches (fx->fmc), 2);
    RUN (fx->fmc, o, fmc_login (fx->fmc, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_int_equal (fmc_token_fetches (fx->fmc), 3);
}

/* ---- concurrency --------------------------------------------------- */

static void calls_overlap_on_one_loop (void **state)
{
    struct fx *fx = *state;
    enum { N = 200 };
    struct outcome *o = calloc (N, sizeof (*o));
    struct fmb_error e;
    const char *args[] = {"--latency", "100", NULL};
    start (fx, FMB_AUTH_OAUTH, args);
    fx->cfg.max_connections = 64;
    make_client (fx);
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf (id, sizeof (id), "c1-%d", i);
        assert_int_equal (fmc_job_get (fx->fmc, id, on_done, &o[i], &e), 0);
    }
    assert_int_equal (fmc_inflight (fx->fmc), N);
    assert_int_equal (fmc_run (fx->fmc, 60000), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal (o[i].done, 1);
        EXPECT (o[i], FMC_NOT_FOUND);
    }
    /* Overlap, shown by the FM itself: one at a time would be 1, and the
     * cap of 64 connections bounds it from above. */
    int peak = state_int (&fx->m, "max_concurrency");
    print_message ("%d calls, peak concurrency at the FM %d\n", N, peak);
    assert_true (peak >= 32);
    assert_true (peak <= 64);
    free (o);
}

/* ---- holding the calls that change the FM --------------------------- */

/* Drive the loop until 'a' and 'b' are done or 'ms' pass. */
static void drive_until (struct fmc *fmc, const int *a, const int *b, int ms)
{
    int64_t end = fmb_monotime_ms () + ms;
    while (!(*a && *b) && fmb_monotime_ms () < end) {
        struct pollfd fds[64];
        int n = fmc_pollfds (fmc, fds, 64);
        int t = fmc_timeout_ms (fmc);
        poll (fds, (nfds_t)n, t < 0 || t > 50 ? 50 : t);
        fmc_process (fmc, fds, n);
    }
}

/* mockfm without auth, a client, and the FM holding jobs c1-1 and c1-2. */
static struct fmc *start_with_two_jobs (struct fx *fx)
{
    struct outcome made;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    struct fmc *c = fx->fmc;
    RUN (c, made, fmc_job_create (c, "c1-1", 4, on_done, &made, &e_));
    RUN (c, made, fmc_job_create (c, "c1-2", 4, on_done, &made, &e_));
    return c;
}

/* The broker's promise "intent before the FM call" rests on this: while
 * held, a change waits for fmc_start_held (or is withdrawn unsent), and
 * reads, including a reservation's GET and the POST after it, go at once. */
static void held_changes_wait_for_their_commit (void **state)
{
    struct fx *fx = *state;
    struct outcome del, get, rsv, gone;
    struct fmb_error e;
    struct fmc *c = start_with_two_jobs (fx);

    memset (&del, 0, sizeof (del));
    memset (&get, 0, sizeof (get));
    memset (&rsv, 0, sizeof (rsv));
    fmc_hold (c, true);
    assert_int_equal (fmc_job_delete (c, "c1-1", on_done, &del, &e), 0);
    assert_int_equal (fmc_job_get (c, "c1-2", on_done, &get, &e), 0);
    assert_int_equal (
        fmc_job_reserve (c, "c1-3", 4, 5000, FMC_RESERVE_GET_FIRST, on_done, &rsv, &e),
        0);
    drive_until (c, &get.done, &rsv.done, 5000);
    EXPECT (get, FMC_OK);
    EXPECT (rsv, FMC_OK);
    assert_true (rsv.created);
    /* the delete has not left: the FM still has the job */
    assert_int_equal (del.done, 0);
    assert_int_equal (mockfm_log_count (&fx->m, "DELETE /fabric/collectives/jobs/c1-1"),
                      0);
    assert_int_equal (fmc_inflight (c), 1);

    fmc_start_held (c);
    fmc_hold (c, false);
    assert_int_equal (fmc_run (c, 20000), 0);
    assert_int_equal (del.done, 1);
    EXPECT (del, FMC_OK);

    /* withdrawn: completes at once, and the FM never hears of it */
    memset (&gone, 0, sizeof (gone));
    fmc_hold (c, true);
    assert_int_equal (fmc_job_delete_step (c, "c1-2", "0", on_done, &gone, &e), 0);
    assert_int_equal (fmc_job_delete (c, "c1-2", on_done, &gone, &e), 0);
    fmc_drop_held (c);
    fmc_hold (c, false);
    assert_int_equal (gone.done, 2);
    EXPECT (gone, FMC_NOT_SENT);
    assert_int_equal (fmc_inflight (c), 0);
    assert_int_equal (fmc_run (c, 1000), 0);
    json_t *s = mockfm_state (&fx->m);
    assert_null (json_object_get (json_object_get (s, "jobs"), "c1-1"));
    assert_non_null (json_object_get (json_object_get (s, "jobs"), "c1-2"));
    assert_non_null (json_object_get (json_object_get (s, "jobs"), "c1-3"));
    json_decref (s);
    assert_int_equal (mockfm_log_count (&fx->m, "PATCH /fabric/collectives/jobs/c1-2"),
                      0);
    assert_int_equal (mockfm_log_count (&fx->m, "DELETE /fabric/collectives/jobs/c1-2"),
                      0);
}

static void on_counted (const struct fmc_result *r, void *arg)
{
    int *n = arg;
    if (r->status == FMC_NOT_FOUND)
        n[0]++;
    else
        n[1]++;
}

/* A storm of releases committed together (a reconciliation's orphans)
 * starts over several fmc_start_held calls, FMC_START_BUDGET_US each,
 * not in one loop turn; fmc_timeout_ms asks for the next at once, and
 * every one of them reaches the FM.  (1,000 calls: a start costs
 * 10-300 us here, the first 16 with a connect, so 2 ms never starts them
 * all.) */
static void a_storm_of_held_calls_starts_over_several_calls (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    enum { N = 1000 };
    int counts[2] = {0, 0}; /* not found (as expected), anything else */
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    struct fmc *c = fx->fmc;
    fmc_hold (c, true);
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf (id, sizeof (id), "c1-storm%d", i);
        assert_int_equal (fmc_job_delete (c, id, on_counted, counts, &e), 0);
    }
    fmc_start_held (c);
    fmc_hold (c, false);
    unsigned left = fmc_kept (c);
    print_message ("%u of %d calls left for the next fmc_start_held\n", left, N);
    assert_true (left > 0 && left < N);
    /* fmc_process does not start them (its time is for answers); once
     * the started ones have answered, the kept ones alone make
     * fmc_timeout_ms ask for the next turn at once */
    int64_t until = fmb_monotime_ms () + 20000;
    while (fmc_inflight (c) > fmc_kept (c) && fmb_monotime_ms () < until) {
        struct pollfd fds[64];
        int n = fmc_pollfds (c, fds, 64);
        poll (fds, (nfds_t)n, 10);
        fmc_process (c, fds, n);
    }
    assert_int_equal (fmc_kept (c), left);
    assert_int_equal (fmc_inflight (c), left);
    assert_int_equal (fmc_timeout_ms (c), 0);
    fmc_start_held (c);
    assert_true (fmc_kept (c) < left);
    assert_int_equal (fmc_run (c, 60000), 0);
    assert_int_equal (counts[0], N);
    assert_int_equal (counts[1], 0);
    assert_int_equal (fmc_kept (c), 0);
    assert_int_equal (
        mockfm_log_count (&fx->m, "DELETE /fabric/collectives/jobs/c1-storm"), N);
}

/* The loop sends a pass's answers before its FM changes (fmc_keep_held);
 * the next pass's commit may fail meanwhile, and withdrawing that pass's
 * changes must not withdraw the committed ones: they leave at the next
 * fmc_start_held, in the order they were made. */
static void kept_changes_outlive_a_later_withdrawal (void **state)
{
    struct fx *fx = *state;
    struct outcome kept, gone;
    struct fmb_error e;
    struct fmc *c = start_with_two_jobs (fx);

    memset (&kept, 0, sizeof (kept));
    memset (&gone, 0, sizeof (gone));
    fmc_hold (c, true);
    assert_int_equal (fmc_job_delete (c, "c1-1", on_done, &kept, &e), 0);
    fmc_keep_held (c); /* its pass committed */
    assert_int_equal (fmc_job_delete (c, "c1-2", on_done, &gone, &e), 0);
    fmc_drop_held (c); /* the next pass did not */
    fmc_hold (c, false);
    assert_int_equal (gone.done, 1);
    EXPECT (gone, FMC_NOT_SENT);
    assert_int_equal (kept.done, 0); /* not sent, not withdrawn */
    assert_int_equal (mockfm_log_count (&fx->m, "DELETE /fabric/collectives/jobs/c1-1"),
                      0);

    fmc_start_held (c);
    assert_int_equal (fmc_run (c, 20000), 0);
    EXPECT (kept, FMC_OK);
    json_t *s = mockfm_state (&fx->m);
    assert_null (json_object_get (json_object_get (s, "jobs"), "c1-1"));
    assert_non_null (json_object_get (json_object_get (s, "jobs"), "c1-2"));
    json_decref (s);
    assert_int_equal (mockfm_log_count (&fx->m, "DELETE /fabric/collectives/jobs/c1-2"),
                      0);
}

/* ---- a burst of answers --------------------------------------------- */

static void on_done_slowly (const struct fmc_result *r, void *arg)
{
    (void)r;
    ++*(int *)arg;
    usleep (1000); /* as a callback that writes to a store */
}

/* Calls that end together are answered over several fmc_process calls,
 * about FMC_PROCESS_BUDGET_US of callbacks each, so that a burst of
 * answers (64 releases) never holds a loop pass; fmc_timeout_ms asks for
 * the rest at once. */
static void a_burst_of_answers_is_spread_over_calls (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    enum { N = 40 };
    int done = 0, most = 0;
    bool asked_at_once = false;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    struct fmc *c = fx->fmc;
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf (id, sizeof (id), "c1-burst%d", i);
        assert_int_equal (fmc_job_get (c, id, on_done_slowly, &done, &e), 0);
    }
    int64_t end = fmb_monotime_ms () + 20000;
    while (done < N && fmb_monotime_ms () < end) {
        struct pollfd fds[64];
        int n = fmc_pollfds (c, fds, 64);
        int t = fmc_timeout_ms (c);
        poll (fds, (nfds_t)n, t < 0 || t > 50 ? 50 : t);
        usleep (20 * 1000); /* answers pile up, as behind a busy loop pass */
        int before = done;
        fmc_process (c, fds, n);
        if (done - before > most)
            most = done - before;
        if (done < N && done > before && fmc_timeout_ms (c) == 0)
            asked_at_once = true;
    }
    print_message ("%d answers, at most %d in one fmc_process\n", done, most);
    assert_int_equal (done, N);
    assert_true (most >= 2); /* answers did pile up */
    assert_true (most <= FMC_PROCESS_BUDGET_US / 1000 + 2);
    assert_true (asked_at_once);
}

/* A reservation whose intent did not commit must not create anything:
 * abandoned while its GET is out, it ends without the POST. */
static void abandoned_reservation_creates_nothing (void **state)
{
    struct fx *fx = *state;
    struct outcome o, kept;
    struct fmb_error e;
    const char *args[] = {"--latency", "200", NULL};
    start (fx, FMB_AUTH_NONE, args);
    make_client (fx);
    memset (&o, 0, sizeof (o));
    memset (&kept, 0, sizeof (kept));
    assert_int_equal (
        fmc_job_reserve (
            fx->fmc, "c1-7", 4, 5000, FMC_RESERVE_GET_FIRST, on_done, &o, &e),
        0);
    assert_int_equal (
        fmc_job_reserve (
            fx->fmc, "c1-8", 4, 5000, FMC_RESERVE_GET_FIRST, on_done, &kept, &e),
        0);
    assert_int_equal (fmc_job_reserve_abandon (fx->fmc, "c1-7"), 1);
    assert_int_equal (fmc_job_reserve_abandon (fx->fmc, "c1-9"), 0);
    assert_int_equal (fmc_run (fx->fmc, 20000), 0);
    assert_int_equal (o.done, 1);
    EXPECT (o, FMC_NOT_SENT);
    EXPECT (kept, FMC_OK);
    assert_true (kept.created);
    assert_int_equal (mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-7"),
                      1);
    assert_int_equal (mockfm_log_count (&fx->m, "POST /fabric/collectives/jobs"), 1);
    json_t *st = mockfm_state (&fx->m);
    assert_null (json_object_get (json_object_get (st, "jobs"), "c1-7"));
    assert_non_null (json_object_get (json_object_get (st, "jobs"), "c1-8"));
    json_decref (st);
}

/* ---- failure classification ---------------------------------------- */

struct fault_case {
    const char *script;
    enum fmc_status want;
};

static void every_failure_is_classified (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    static const struct fault_case cases[] = {
        {"GET /fabric/collectives/jobs/* 503", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* 500", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* 429", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* 409", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* 400", FMC_PERMANENT},
        {"GET /fabric/collectives/jobs/* 403", FMC_UNAUTHORIZED},
        {"GET /fabric/collectives/jobs/* drop", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* truncate", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* garbage", FMC_PERMANENT},
        {"GET /fabric/collectives/jobs/* wrong_types", FMC_PERMANENT},
        {"GET /fabric/collectives/jobs/* delay=3000", FMC_RETRYABLE},
        {"GET /fabric/collectives/jobs/* slow_body", FMC_RETRYABLE},
    };
    start (fx, FMB_AUTH_NONE, NULL);
    fx->cfg.timeout_ms = 1000;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_create (fx->fmc, "c1-1", 2, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        mockfm_ctl (&fx->m, "POST", "/_mock/faults", cases[i].script);
        RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
        if (o.status != cases[i].want)
            fail_msg ("'%s': got %s (%s)",
                      cases[i].script,
                      fmc_status_name (o.status),
                      o.error);
        assert_true (o.error[0] != '\0');
        mockfm_ctl (&fx->m, "DELETE", "/_mock/faults", NULL);
    }
    /* wrong types in a listing */
    mockfm_ctl (
        &fx->m, "POST", "/_mock/faults", "GET /fabric/collectives/jobs/ wrong_types");
    RUN (fx->fmc, o, fmc_job_list (fx->fmc, on_done, &o, &e_));
    EXPECT (o, FMC_PERMANENT);
    assert_non_null (strstr (o.error, "documentLinks"));
    mockfm_ctl (&fx->m, "DELETE", "/_mock/faults", NULL);
    /* the FM's own words make it into the message */
    mockfm_ctl (&fx->m, "POST", "/_mock/faults", "POST /fabric/collectives/jobs 503");
    RUN (fx->fmc, o, fmc_job_create (fx->fmc, "c1-2", 2, on_done, &o, &e_));
    EXPECT (o, FMC_RETRYABLE);
    assert_string_equal (
        o.error, "FM answered 503 to POST /fabric/collectives/jobs: injected fault");
    mockfm_ctl (&fx->m, "DELETE", "/_mock/faults", NULL);
    /* nothing listening */
    int port = fx->m.port;
    mockfm_stop (&fx->m);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_RETRYABLE);
    assert_int_equal (o.http, 0);
    (void)port;
}

static void reserve_keeps_its_deadline (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    mockfm_ctl (
        &fx->m, "POST", "/_mock/faults", "GET /fabric/collectives/jobs/* delay=3000");
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-1", 2, 300, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_RETRYABLE);
    assert_non_null (strstr (o.error, "GET /fabric/collectives/jobs/c1-1"));
    /* a slow token endpoint counts against the deadline too */
    mockfm_stop (&fx->m);
    const char *args[] = {"--faults", "/dev/null", NULL};
    start (fx, FMB_AUTH_OAUTH, args);
    make_client (fx);
    mockfm_ctl (&fx->m, "POST", "/_mock/faults", "POST /oauth/token delay=3000");
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-1", 2, 300, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_RETRYABLE);
    assert_non_null (strstr (o.error, "deadline"));
}

static void reserve_survives_a_create_race (void **state)
{
    struct fx *fx = *state;
    struct outcome o, first;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    RUN (fx->fmc, first, fmc_job_create (fx->fmc, "c1-9", 2, on_done, &first, &e_));
    EXPECT (first, FMC_OK);
    /* the first GET misses it, the POST then meets 409, the second GET finds it */
    mockfm_ctl (
        &fx->m, "POST", "/_mock/faults", "GET /fabric/collectives/jobs/c1-9 404 x1");
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-9", 2, 2000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_false (o.created);
    assert_string_equal (o.token, first.token);
    assert_int_equal (mockfm_log_count (&fx->m, "POST /fabric/collectives/jobs 409"),
                      1);
}

/* fmc_job_reserve (FMC_RESERVE_POST_FIRST) as the broker calls it: inside a pass, its
 * POST held until the pass commits (here at once). */
#define RUN_NEW(fmc, o, id, limit)                     \
    do {                                               \
        struct fmb_error e_;                           \
        memset (&(o), 0, sizeof (o));                  \
        fmc_hold ((fmc), true);                        \
        if (fmc_job_reserve ((fmc),                    \
                             (id),                     \
                             (limit),                  \
                             2000,                     \
                             FMC_RESERVE_POST_FIRST,   \
                             on_done,                  \
                             &(o),                     \
                             &e_) < 0)                 \
            fail_msg ("fmc_job_reserve: %s", e_.text); \
        fmc_start_held (fmc);                          \
        fmc_hold ((fmc), false);                       \
        assert_int_equal (fmc_run ((fmc), 20000), 0);  \
        assert_int_equal ((o).done, 1);                \
    } while (0)

/* A job the broker never reserved before: the POST alone, and it waits
 * for the intent's commit like any change (withdrawn, the FM never hears
 * of it). */
static void new_reservation_posts_first_and_waits_for_its_commit (void **state)
{
    struct fx *fx = *state;
    struct outcome o, gone;
    struct fmb_error e;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    memset (&o, 0, sizeof (o));
    fmc_hold (fx->fmc, true);
    assert_int_equal (
        fmc_job_reserve (
            fx->fmc, "c1-4", 3, 5000, FMC_RESERVE_POST_FIRST, on_done, &o, &e),
        0);
    assert_int_equal (fmc_run (fx->fmc, 300), -1); /* held: nothing leaves */
    assert_int_equal (o.done, 0);
    assert_int_equal (mockfm_log_count (&fx->m, "POST /fabric/collectives/jobs"), 0);
    int64_t left = fmb_monotime_ms ();
    fmc_start_held (fx->fmc);
    fmc_hold (fx->fmc, false);
    assert_int_equal (fmc_run (fx->fmc, 20000), 0);
    int64_t answered = fmb_monotime_ms ();
    EXPECT (o, FMC_OK);
    assert_true (o.created);
    assert_int_equal (o.limit, 3);
    assert_int_equal (mockfm_log_count (&fx->m, "POST /fabric/collectives/jobs 201"),
                      1);
    assert_int_equal (mockfm_log_count (&fx->m, "GET "), 0);
    /* its latency is the FM's, not the 300 ms it was held */
    if (o.elapsed > answered - left)
        fail_msg ("elapsed %u ms includes the hold (%lld ms from leaving to answer)",
                  o.elapsed,
                  (long long)(answered - left));

    memset (&gone, 0, sizeof (gone));
    fmc_hold (fx->fmc, true);
    assert_int_equal (
        fmc_job_reserve (
            fx->fmc, "c1-5", 3, 5000, FMC_RESERVE_POST_FIRST, on_done, &gone, &e),
        0);
    fmc_drop_held (fx->fmc);
    fmc_hold (fx->fmc, false);
    assert_int_equal (fmc_run (fx->fmc, 1000), 0);
    EXPECT (gone, FMC_NOT_SENT);
    json_t *st = mockfm_state (&fx->m);
    assert_null (json_object_get (json_object_get (st, "jobs"), "c1-5"));
    json_decref (st);
    assert_int_equal (mockfm_log_count (&fx->m, "POST "), 1);

    /* not holding (a caller outside its pass, a bug): a POST first would
     * leave before the intent commits, so the GET goes first */
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-6", 3, 5000, FMC_RESERVE_POST_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_true (o.created);
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-6 404"), 1);
}

/* A call held for a commit slower than its deadline never leaves: it
 * completes retryable and unsent (the broker then does not take the FM
 * for down: it was never asked), and the FM hears nothing of it. */
static void count_observed (const struct fmc_result *r, void *arg)
{
    (void)r;
    (*(int *)arg)++;
}

static void held_past_its_deadline_never_leaves (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    struct fmb_error e;
    int observed = 0;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    fmc_set_observer (fx->fmc, count_observed, &observed);
    memset (&o, 0, sizeof (o));
    fmc_hold (fx->fmc, true);
    assert_int_equal (
        fmc_job_reserve (
            fx->fmc, "c1-7", 3, 200, FMC_RESERVE_POST_FIRST, on_done, &o, &e),
        0);
    usleep (300 * 1000); /* the commit it waits for takes longer */
    fmc_start_held (fx->fmc);
    fmc_hold (fx->fmc, false);
    assert_int_equal (fmc_run (fx->fmc, 2000), 0);
    EXPECT (o, FMC_RETRYABLE);
    assert_true (o.unsent);
    assert_int_equal (o.http, 0);
    if (!strstr (o.error, "before the call could leave"))
        fail_msg ("error '%s'", o.error);
    assert_int_equal (mockfm_log_count (&fx->m, "POST "), 0);
    assert_int_equal (observed, 0); /* not an FM request in the metrics */
    /* a call that did leave and got no answer is not 'unsent' */
    mockfm_stop (&fx->m);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-7", on_done, &o, &e_));
    EXPECT (o, FMC_RETRYABLE);
    assert_false (o.unsent);
    assert_int_equal (observed, 1);
}

/* The FM holds the job already (a standby's, a store restored from an
 * older backup): the POST is refused, the GET after it finds the job. */
static void new_reservation_of_a_job_the_fm_holds_finds_it (void **state)
{
    struct fx *fx = *state;
    struct outcome o, first;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    RUN (fx->fmc, first, fmc_job_create (fx->fmc, "c1-6", 2, on_done, &first, &e_));
    EXPECT (first, FMC_OK);
    RUN_NEW (fx->fmc, o, "c1-6", 2);
    EXPECT (o, FMC_OK);
    assert_false (o.created);
    assert_string_equal (o.token, first.token);
    assert_int_equal (mockfm_log_count (&fx->m, "POST /fabric/collectives/jobs 409"),
                      1);
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-6 200"), 1);
}

/* A POST refused for a reason of its own (400) by an FM that has no such
 * job: the POST's answer is the result, with what the GET said.  Which
 * answers are followed by a GET. */
static void refused_reservation_keeps_the_posts_reason (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    mockfm_ctl (&fx->m, "POST", "/_mock/faults", "POST /fabric/collectives/jobs 400");
    RUN_NEW (fx->fmc, o, "c1-7", 2);
    EXPECT (o, FMC_PERMANENT);
    assert_int_equal (o.http, 400);
    assert_non_null (strstr (o.error, "POST /fabric/collectives/jobs"));
    assert_non_null (strstr (o.error, "the GET after it: no such job"));
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-7 404"), 1);
    /* the same for a reservation that asked first */
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-8", 2, 2000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_PERMANENT);
    assert_int_equal (o.http, 400);
    assert_non_null (strstr (o.error, "the GET after it: no such job"));
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-8 404"), 2);
    /* a 503 may be the FM's answer to a duplicate too: GET after it */
    mockfm_ctl (&fx->m, "POST", "/_mock/faults", "POST /fabric/collectives/jobs 503");
    RUN_NEW (fx->fmc, o, "c1-9", 2);
    EXPECT (o, FMC_RETRYABLE);
    assert_int_equal (o.http, 503);
    assert_int_equal (
        mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-9 404"), 1);
    /* a POST that got no answer: the GET would get none either */
    mockfm_ctl (&fx->m, "POST", "/_mock/faults", "POST /fabric/collectives/jobs drop");
    RUN_NEW (fx->fmc, o, "c1-10", 2);
    EXPECT (o, FMC_RETRYABLE);
    assert_int_equal (o.http, 0);
    assert_int_equal (mockfm_log_count (&fx->m, "GET /fabric/collectives/jobs/c1-10"),
                      0);
    /* refused, and the GET after it gets no answer: the FM may be down,
     * and the result says so (no HTTP status) with the POST's reason */
    mockfm_ctl (
        &fx->m,
        "POST",
        "/_mock/faults",
        "POST /fabric/collectives/jobs 409\nGET /fabric/collectives/jobs/* drop");
    RUN_NEW (fx->fmc, o, "c1-11", 2);
    EXPECT (o, FMC_RETRYABLE);
    assert_int_equal (o.http, 0);
    assert_non_null (strstr (o.error, "409"));
    assert_non_null (strstr (o.error, "the GET after it"));
}

/* ---- the application side of the mock (what libfabric does) -------- */

static long mcast_post (
    struct fx *fx, const char *token, const char *job, const char *step, char **resp)
{
    char url[256], auth[256], body[512];
    snprintf (url, sizeof (url), "%s/fabric/collectives/multicasts", fx->m.url);
    snprintf (auth, sizeof (auth), "Bearer %s", token);
    snprintf (body,
              sizeof (body),
              "{\"macs\":[\"0:1A:2B\",\"0:1A:2C\",\"1:00:07\"],\"vni\": 1024,"
              "\"timeout\":20000000,\"jobID\":\"%s\",\"jobStepID\":\"%s\"}",
              job,
              step);
    return http_call ("POST", url, auth, body, resp);
}

static int step_trees (struct fx *fx, const char *job)
{
    json_t *s = mockfm_state (&fx->m);
    size_t i;
    json_t *t;
    int n = 0;
    json_array_foreach (
        json_object_get (s, "trees"),
        i,
        t) if (strcmp (json_string_value (json_object_get (t, "jobID")), job) == 0) n++;
    json_decref (s);
    return n;
}

static void libfabric_side_works_with_the_session_token (void **state)
{
    struct fx *fx = *state;
    struct outcome a, b, o;
    char *resp;
    const char *args[] = {"--pool", "3", NULL};
    start (fx, FMB_AUTH_OAUTH, args);
    make_client (fx);
    RUN (fx->fmc,
         a,
         fmc_job_reserve (
             fx->fmc, "c1-A", 2, 2000, FMC_RESERVE_GET_FIRST, on_done, &a, &e_));
    RUN (fx->fmc,
         b,
         fmc_job_reserve (
             fx->fmc, "c1-B", 5, 2000, FMC_RESERVE_GET_FIRST, on_done, &b, &e_));
    EXPECT (a, FMC_OK);
    EXPECT (b, FMC_OK);

    /* up to mcastLimit, then 507 "01:" */
    int ids[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal (mcast_post (fx, a.token, "c1-A", i == 0 ? "0" : "1", &resp),
                          200);
        json_t *r = json_loads (resp, 0, NULL);
        json_int_t id = json_integer_value (json_object_get (r, "mcastID"));
        const char *root = json_string_value (json_object_get (r, "hwRoot"));
        assert_true (json_is_integer (json_object_get (r, "mcastID")));
        assert_true (id >= 0 && id <= 8191);
        /* six groups: the low 20 bits one member's NIC address, the rest 0
         * (libfabric ORs a non-zero top group into the address it decodes) */
        unsigned g[6];
        assert_int_equal (
            sscanf (
                root, "%x:%x:%x:%x:%x:%x", &g[0], &g[1], &g[2], &g[3], &g[4], &g[5]),
            6);
        assert_int_equal (g[0] | g[1] | g[2] | (g[3] & 0xf0), 0);
        unsigned nic = (g[3] << 16) | (g[4] << 8) | g[5];
        assert_true (nic == 0x01a2b || nic == 0x01a2c || nic == 0x10007);
        ids[i] = (int)id;
        json_decref (r);
        free (resp);
    }
    assert_int_equal (mcast_post (fx, a.token, "c1-A", "0", &resp), 507);
    assert_non_null (strstr (resp, "\"message\":\"01:"));
    free (resp);
    /* the global pool (3) runs out: 507 "02:" */
    assert_int_equal (mcast_post (fx, b.token, "c1-B", "0", &resp), 200);
    free (resp);
    assert_int_equal (mcast_post (fx, b.token, "c1-B", "0", &resp), 507);
    assert_non_null (strstr (resp, "\"message\":\"02:"));
    free (resp);
    /* wrong or foreign tokens */
    assert_int_equal (mcast_post (fx, "not-a-token", "c1-A", "0", &resp), 401);
    free (resp);
    assert_int_equal (mcast_post (fx, a.token, "c1-B", "0", &resp), 403);
    free (resp);

    /* delete by mcastID: 200 with JSON, never 204; only with the owner's token */
    char url[256], auth[256];
    snprintf (
        url, sizeof (url), "%s/fabric/collectives/multicasts/%d", fx->m.url, ids[1]);
    snprintf (auth, sizeof (auth), "Bearer %s", b.token);
    assert_int_equal (http_call ("DELETE", url, auth, NULL, &resp), 403);
    free (resp);
    snprintf (auth, sizeof (auth), "Bearer %s", a.token);
    assert_int_equal (http_call ("DELETE", url, auth, NULL, &resp), 200);
    assert_non_null (strstr (resp, "\"mcastID\""));
    free (resp);
    assert_int_equal (http_call ("DELETE", url, auth, NULL, &resp), 404);
    free (resp);
    assert_int_equal (step_trees (fx, "c1-A"), 1);

    /* the broker's step cleanup removes the step's trees */
    RUN (fx->fmc, o, fmc_job_delete_step (fx->fmc, "c1-A", "0", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_int_equal (step_trees (fx, "c1-A"), 0);
    assert_int_equal (step_trees (fx, "c1-B"), 1);
    /* and deleting the job removes the rest */
    RUN (fx->fmc, o, fmc_job_delete (fx->fmc, "c1-B", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    assert_int_equal (step_trees (fx, "c1-B"), 0);
    assert_int_equal (state_int (&fx->m, "pool_used"), 0);
}

/* ---- the mock keeps its state against malformed requests ----------- */

static void mockfm_survives_malformed_requests (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    char url[256], *resp;
    start (fx, FMB_AUTH_NONE, NULL);
    make_client (fx);
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-1", 2, 2000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    json_t *before = mockfm_state (&fx->m);
    char *huge = malloc (200 * 1024);
    memset (huge, 'x', 200 * 1024 - 1);
    huge[200 * 1024 - 1] = '\0';
    struct {
        const char *method, *path, *body;
        long want;
    } cases[] = {
        {"POST", "/fabric/collectives/jobs", "{not json", 400},
        {"POST", "/fabric/collectives/jobs", "[1,2]", 400},
        {"POST", "/fabric/collectives/jobs", "{\"jobID\":5,\"mcastLimit\":2}", 400},
        {"POST",
         "/fabric/collectives/jobs",
         "{\"jobID\":\"c1-2\",\"mcastLimit\":\"2\"}",
         400},
        {"POST", "/fabric/collectives/jobs", "{\"jobID\":\"c1-2\"}", 400},
        {"POST",
         "/fabric/collectives/jobs",
         "{\"jobID\":\"c1-2\",\"mcastLimit\":-1}",
         400},
        {"POST",
         "/fabric/collectives/jobs",
         "{\"jobID\":\"c1-2\",\"jobID\":\"c1-3\",\"mcastLimit\":1}",
         400},
        {"POST", "/fabric/collectives/jobs", huge, 413},
        {"PATCH", "/fabric/collectives/jobs/c1-1", "{\"jobSteps\":{\"0\":[1]}}", 400},
        {"PATCH", "/fabric/collectives/jobs/c1-1", "{\"jobSteps\":7}", 400},
        {"PUT", "/fabric/collectives/jobs/c1-1", "{}", 405},
        {"GET", "/fabric/collectives/nothing", NULL, 404},
        {"GET", "/fabric/collectives/jobs/c1-1/extra", NULL, 404},
        {"POST", "/fabric/collectives/multicasts", "{\"macs\":[]}", 400},
        {"POST",
         "/fabric/collectives/multicasts",
         "{\"macs\":[\"zz\"],\"vni\":1,\"timeout\":1,\"jobID\":\"c1-1\",\"jobStepID\":"
         "\"0\"}",
         400},
        {"DELETE", "/fabric/collectives/multicasts/99999", NULL, 400},
        {"DELETE", "/fabric/collectives/multicasts/abc", NULL, 400},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        snprintf (url, sizeof (url), "%s%s", fx->m.url, cases[i].path);
        long code = http_call (cases[i].method, url, NULL, cases[i].body, &resp);
        if (code != cases[i].want)
            fail_msg ("case %zu %s %s: got %ld %s",
                      i,
                      cases[i].method,
                      cases[i].path,
                      code,
                      resp);
        free (resp);
    }
    free (huge);
    json_t *after = mockfm_state (&fx->m);
    assert_true (
        json_equal (json_object_get (before, "jobs"), json_object_get (after, "jobs")));
    assert_true (json_equal (json_object_get (before, "trees"),
                             json_object_get (after, "trees")));
    json_decref (before);
    json_decref (after);
}

static void mock_restart_forgets_and_state_file_remembers (void **state)
{
    struct fx *fx = *state;
    struct outcome o;
    char *sf = tu_path (fx->dir, "fm.state");
    const char *args[] = {"--state-file", sf, NULL};
    start (fx, FMB_AUTH_NONE, args);
    make_client (fx);
    RUN (fx->fmc,
         o,
         fmc_job_reserve (
             fx->fmc, "c1-1", 2, 2000, FMC_RESERVE_GET_FIRST, on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    /* a process restart with the state file keeps the reservation */
    mockfm_stop (&fx->m);
    start (fx, FMB_AUTH_NONE, args);
    fx->cfg.url = fx->m.url;
    make_client (fx);
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_OK);
    /* "restart that forgets all state" */
    mockfm_ctl (&fx->m, "POST", "/_mock/restart", "");
    RUN (fx->fmc, o, fmc_job_get (fx->fmc, "c1-1", on_done, &o, &e_));
    EXPECT (o, FMC_NOT_FOUND);
    free (sf);
}

/* ---- a large listing ------------------------------------------------ */

#define BIG_LISTING 50000

struct listing_seen {
    int done;
    enum fmc_status status;
    size_t n;
    size_t ours;         /* ids of the form c1-bNNNNNN, each once */
    unsigned char *seen; /* by NNNNNN */
    bool on_caller_thread;
    bool take;  /* keep the ids (fmc_take_job_ids) */
    bool taken; /* they were the result's, and taken once only */
    pthread_t caller;
};

static void on_listing (const struct fmc_result *r, void *arg)
{
    struct listing_seen *ls = arg;
    ls->done++;
    ls->status = r->status;
    ls->n = r->njob_ids;
    ls->on_caller_thread = pthread_equal (pthread_self (), ls->caller);
    for (size_t i = 0; i < r->njob_ids; i++) {
        unsigned k;
        char tail;
        if (sscanf (r->job_ids[i], "c1-b%u%c", &k, &tail) == 1 && k < BIG_LISTING &&
            !ls->seen[k]++)
            ls->ours++;
    }
    if (ls->take) {
        const char **ids = fmc_take_job_ids (r);
        ls->taken = ids && (const char *const *)ids == r->job_ids &&
                    ids[r->njob_ids] == NULL && !fmc_take_job_ids (r);
        free (ids); /* ASan: one allocation, now ours */
    }
}

/* A listing of 50,000 FM entries (~2 MB of JSON) is read over several
 * fmc_process calls (FMC_PROCESS_READ_MAX each) and parsed on fmclient's
 * parser thread; its callback still runs in fmc_process on the caller's
 * thread, with every id, and the parser's fd is polled meanwhile (the
 * fmc_run below only wakes for what fmc_pollfds gives it).  A second
 * listing on the same client reuses the thread, and destroying the
 * client with a listing still in flight leaks nothing (ASan). */
static void large_listing_is_parsed_off_the_loop (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    char *sf = tu_path (fx->dir, "fm.state");
    FILE *f = fopen (sf, "w");
    assert_non_null (f);
    fprintf (f, "{\"trees\":[],\"jobs\":{");
    for (int i = 0; i < BIG_LISTING; i++)
        fprintf (f,
                 "%s\"c1-b%06d\":{\"jobID\":\"c1-b%06d\",\"mcastLimit\":4,"
                 "\"sessionToken\":\"tok-%06d\",\"jobSteps\":{}}",
                 i ? "," : "",
                 i,
                 i,
                 i);
    fprintf (f, "}}");
    fclose (f);
    const char *args[] = {"--state-file", sf, "--state-readonly", NULL};
    start (fx, FMB_AUTH_NONE, args);
    make_client (fx);
    for (int round = 1; round <= 2; round++) {
        struct listing_seen ls = {.caller = pthread_self (), .take = round == 2};
        ls.seen = calloc (BIG_LISTING, 1);
        if (fmc_job_list (fx->fmc, on_listing, &ls, &e) < 0)
            fail_msg ("fmc_job_list: %s", e.text);
        assert_int_equal (fmc_run (fx->fmc, 20000), 0);
        assert_int_equal (ls.done, 1);
        assert_int_equal (ls.status, FMC_OK);
        assert_int_equal (ls.n, BIG_LISTING);
        assert_int_equal (ls.ours, BIG_LISTING);
        assert_true (ls.on_caller_thread);
        assert_int_equal (fmc_offloop_parses (fx->fmc), round);
        /* ~2 MB is read over several fmc_process calls, not in one */
        assert_true (fmc_read_pauses (fx->fmc) >= (unsigned long)round);
        assert_int_equal (ls.taken, round == 2);
        free (ls.seen);
    }
    /* a malformed answer takes the same path and is classified there */
    struct outcome o;
    mockfm_ctl (
        &fx->m, "POST", "/_mock/faults", "GET /fabric/collectives/jobs/ wrong_types");
    RUN (fx->fmc, o, fmc_job_list (fx->fmc, on_done, &o, &e_));
    EXPECT (o, FMC_PERMANENT);
    assert_non_null (strstr (o.error, "documentLinks"));
    assert_int_equal (fmc_offloop_parses (fx->fmc), 3);
    mockfm_ctl (&fx->m, "DELETE", "/_mock/faults", NULL);
    /* destroyed while a listing may be on the parser: no callback, no leak */
    struct listing_seen gone = {.caller = pthread_self ()};
    if (fmc_job_list (fx->fmc, on_listing, &gone, &e) < 0)
        fail_msg ("fmc_job_list: %s", e.text);
    for (int i = 0; i < 200 && fmc_offloop_parses (fx->fmc) < 4; i++) {
        struct pollfd fds[16];
        int n = fmc_pollfds (fx->fmc, fds, 16);
        poll (fds, (nfds_t)n, 100);
        fmc_process (fx->fmc, fds, n);
    }
    fmc_destroy (fx->fmc);
    fx->fmc = NULL;
    assert_int_equal (gone.done, 0);
    free (sf);
}

int main (void)
{
#define T(f) cmocka_unit_test_setup_teardown (f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T (every_operation_without_auth),
        T (every_operation_with_basic_auth),
        T (every_operation_with_oauth),
        T (wrong_credentials_are_unauthorized),
        T (secret_files_others_can_read_are_refused),
        T (tls_is_verified_by_default),
        T (mtls_needs_the_client_certificate),
        T (token_expiry_mid_run_fails_no_operation),
        T (a_storm_of_held_calls_starts_over_several_calls),
        T (many_calls_meeting_one_expired_token_refresh_once),
        T (token_is_refreshed_before_it_expires),
        T (persistent_401_stops_after_one_refresh),
        T (calls_overlap_on_one_loop),
        T (held_changes_wait_for_their_commit),
        T (kept_changes_outlive_a_later_withdrawal),
        T (a_burst_of_answers_is_spread_over_calls),
        T (abandoned_reservation_creates_nothing),
        T (every_failure_is_classified),
        T (reserve_keeps_its_deadline),
        T (reserve_survives_a_create_race),
        T (new_reservation_posts_first_and_waits_for_its_commit),
        T (held_past_its_deadline_never_leaves),
        T (new_reservation_of_a_job_the_fm_holds_finds_it),
        T (refused_reservation_keeps_the_posts_reason),
        T (libfabric_side_works_with_the_session_token),
        T (mockfm_survives_malformed_requests),
        T (mock_restart_forgets_and_state_file_remembers),
        T (large_listing_is_parsed_off_the_loop),
    };
    return cmocka_run_group_tests_name ("fmclient", tests, NULL, NULL);
}
