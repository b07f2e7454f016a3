/* mockfm: a stand-in for the HPE Slingshot fabric manager's collectives API.
 *
 * It serves what the real FM serves to its two kinds of client, as far as
 * Slurm's switch/hpe_slingshot and libfabric's CXI provider show it:
 *
 *   workload-manager side (admin credentials: OAuth bearer, Basic or none)
 *     GET    /fabric/collectives/jobs[/]          documentLinks, documentCount
 *     GET    /fabric/collectives/jobs/{id}        200 job object | 404
 *     POST   /fabric/collectives/jobs             {jobID, mcastLimit} -> 201 job
 *     PATCH  /fabric/collectives/jobs/{id}        {"jobSteps":{"s":null}} -> 200 job
 *     DELETE /fabric/collectives/jobs/{id}        200 | 404
 *     POST   /oauth/token                          client-credentials grant
 *   application side (Authorization: Bearer <the job's sessionToken>)
 *     POST   /fabric/collectives/multicasts        {macs, vni, timeout, jobID,
 * jobStepID} DELETE /fabric/collectives/multicasts/{id}   200 JSON (never 204)
 *
 * and, for tests only, /_mock/state (with counters; "in_flight": the
 * FM calls received and not yet answered), /_mock/count?prefix=P (how many
 * jobs' IDs start with P: a watch that costs no copy of the state),
 * /_mock/faults, /_mock/restart, /_mock/expire-tokens and /_mock/config.  Error bodies
 * carry both "detail" (Slurm reads it) and "message" (libfabric reads it; 507s put the
 * "NN:" sub-code there).
 *
 * Fault script (--faults FILE, or the text body of POST /_mock/faults),
 * one rule per line, first match wins:
 *     METHOD PATH ACTION [xCOUNT] [pPROBABILITY]
 * METHOD may be '*'; PATH is a shell pattern ('*' also matches '/');
 * ACTION is an HTTP status (answered with an error body), drop (close the
 * connection without an answer), garbage (200 with a non-JSON body),
 * wrong_types (the normal answer with fields of the wrong JSON type),
 * truncate (half the body, then close), slow_body (one byte each 200 ms),
 * delay=MS (wait, then answer normally), pad=BYTES (the normal answer
 * followed by BYTES spaces: still valid JSON, only larger), hostile_token (the normal
 * answer with a sessionToken that injects shell code) or hostile_detail (500 with an
 * error detail that tries to forge a log line).
 *
 * One thread per connection, so injected latency overlaps across
 * connections just as a real server's would; all state sits behind one
 * mutex.  The request log (--request-log) gets "METHOD PATH STATUS" per
 * request ("507 NN:" with a 507's sub-code) and never a token.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <jansson.h>
#include <microhttpd.h>

#include "fileutil.h"
#include "netaddr.h"

#define MOCK_MAX_BODY   (64 * 1024) /* the largest legitimate body is a few KiB */
#define MOCK_MCAST_IDS  8192        /* the 13-bit multicast address space */
#define MOCK_MAX_RULES  64
#define MOCK_MAX_TOKENS 1024
#define JOBS_PREFIX     "/fabric/collectives/jobs"
#define MCAST_PREFIX    "/fabric/collectives/multicasts"

/* ---- options ------------------------------------------------------- */

static struct {
    const char *listen;
    const char *port_file;
    const char *auth;
    const char *auth_dir;
    const char *request_log;
    const char *faults;
    const char *state_file;
    bool state_readonly; /* load the state file, never write it (benchmarks) */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_client_ca;
    unsigned pool;
    unsigned max_roots;
    unsigned token_lifetime_s;
    unsigned latency_ms;
    unsigned jitter_ms;
} arg_ = {
    .listen = "127.0.0.1:0",
    .auth = "none",
    .pool = 4086,
    .token_lifetime_s = 3600,
};

/* ---- state --------------------------------------------------------- */

enum fault_action {
    FAULT_STATUS,
    FAULT_DROP,
    FAULT_GARBAGE,
    FAULT_WRONG_TYPES,
    FAULT_TRUNCATE,
    FAULT_SLOW_BODY,
    FAULT_DELAY,
    FAULT_PAD,
    FAULT_HOSTILE_TOKEN,
    FAULT_HOSTILE_DETAIL,
};

struct fault_rule {
    char method[16];
    char path[256];
    enum fault_action action;
    int status;
    unsigned delay_ms;
    size_t pad_bytes;
    long remaining; /* -1: unlimited */
    double probability;
};

struct tree {
    bool used;
    char *job;
    char *step;
    uint32_t root; /* 20-bit NIC address of the hwRoot */
};

struct token {
    char value[65];
    time_t expires;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *jobs; /* jobID -> job object */
static struct tree trees[MOCK_MCAST_IDS];
static unsigned trees_used;
static struct token tokens[MOCK_MAX_TOKENS];
static unsigned ntokens;
static struct fault_rule rules[MOCK_MAX_RULES];
static unsigned nrules;
static unsigned long stat_requests, stat_token_grants, stat_restarts;
static atomic_int concurrency;
static int max_concurrency;
static FILE *request_log;
static char *cred_client_id, *cred_client_secret, *cred_passwd;

/* ---- small helpers ------------------------------------------------- */

static void random_hex (char *out, size_t nbytes)
{
    unsigned char buf[64];
    if (nbytes > sizeof (buf))
        nbytes = sizeof (buf);
    if (getrandom (buf, nbytes, 0) != (ssize_t)nbytes)
        abort ();
    for (size_t i = 0; i < nbytes; i++)
        sprintf (out + 2 * i, "%02x", buf[i]);
}

static void sleep_ms (unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

static json_t *error_body (int status, const char *msg)
{
    return json_pack (
        "{s:i, s:s, s:s}", "status", status, "detail", msg, "message", msg);
}

struct reply {
    int status;
    json_t *body; /* owned; NULL for an empty body */
    bool drop;
    enum fault_action shape; /* FAULT_STATUS: normal */
    size_t pad_bytes;        /* FAULT_PAD: spaces after the body */
};

static void reply_set (struct reply *r, int status, json_t *body)
{
    json_decref (r->body);
    r->status = status;
    r->body = body;
}

static void reply_error (struct reply *r, int status, const char *msg)
{
    reply_set (r, status, error_body (status, msg));
}

/* ---- persistence (--state-file) ------------------------------------ */

static json_t *state_to_json (bool with_stats)
{
    json_t *t = json_array ();
    for (int i = 0; i < MOCK_MCAST_IDS; i++)
        if (trees[i].used)
            json_array_append_new (t,
                                   json_pack ("{s:i, s:s, s:s, s:i}",
                                              "mcastID",
                                              i,
                                              "jobID",
                                              trees[i].job,
                                              "jobStepID",
                                              trees[i].step,
                                              "hwRoot",
                                              (int)trees[i].root));
    /* The answer to /_mock/state (with_stats) is written after the lock is
     * let go, while other connections' threads change 'jobs' (benchmark 5
     * crashed here): it gets a copy.  state_save dumps under the lock. */
    json_t *o = json_pack ("{s:o, s:o}",
                           "jobs",
                           with_stats ? json_deep_copy (jobs) : json_incref (jobs),
                           "trees",
                           t);
    if (with_stats) {
        json_object_set_new (o, "pool", json_integer (arg_.pool));
        json_object_set_new (o, "pool_used", json_integer (trees_used));
        json_object_set_new (o, "requests", json_integer ((json_int_t)stat_requests));
        json_object_set_new (
            o, "token_grants", json_integer ((json_int_t)stat_token_grants));
        json_object_set_new (o, "restarts", json_integer ((json_int_t)stat_restarts));
        json_object_set_new (o, "max_concurrency", json_integer (max_concurrency));
        json_object_set_new (o, "in_flight", json_integer (atomic_load (&concurrency)));
    }
    return o;
}

static void state_save (void)
{
    if (!arg_.state_file || arg_.state_readonly)
        return;
    json_t *o = state_to_json (false);
    char *s = json_dumps (o, JSON_COMPACT);
    struct fmb_error e;
    if (!s || fmb_write_file_atomic (arg_.state_file, 0600, s, strlen (s), &e) < 0)
        fprintf (stderr, "mockfm: saving state: %s\n", s ? e.text : "out of memory");
    free (s);
    json_decref (o);
}

static void forget_all (void)
{
    json_decref (jobs);
    jobs = json_object ();
    for (int i = 0; i < MOCK_MCAST_IDS; i++) {
        free (trees[i].job);
        free (trees[i].step);
        trees[i] = (struct tree){0};
    }
    trees_used = 0;
    ntokens = 0;
}

static void state_load (void)
{
    json_error_t jerr;
    json_t *o = arg_.state_file ? json_load_file (arg_.state_file, 0, &jerr) : NULL;
    size_t i;
    json_t *t;
    if (!o)
        return;
    json_decref (jobs);
    jobs = json_incref (json_object_get (o, "jobs"));
    if (!json_is_object (jobs)) {
        json_decref (jobs);
        jobs = json_object ();
    }
    json_array_foreach (json_object_get (o, "trees"), i, t)
    {
        int id = (int)json_integer_value (json_object_get (t, "mcastID"));
        if (id < 0 || id >= MOCK_MCAST_IDS)
            continue;
        trees[id].used = true;
        trees[id].job = strdup (json_string_value (json_object_get (t, "jobID")));
        trees[id].step = strdup (json_string_value (json_object_get (t, "jobStepID")));
        trees[id].root = (uint32_t)json_integer_value (json_object_get (t, "hwRoot"));
        trees_used++;
    }
    json_decref (o);
}

/* ---- faults -------------------------------------------------------- */

static int parse_rule (char *line, struct fault_rule *r, char *err, size_t errlen)
{
    char *save = NULL;
    char *method = strtok_r (line, " \t", &save);
    char *path = strtok_r (NULL, " \t", &save);
    char *action = strtok_r (NULL, " \t", &save);
    if (!method || !path || !action) {
        snprintf (err, errlen, "expected METHOD PATH ACTION");
        return -1;
    }
    *r = (struct fault_rule){.remaining = -1, .probability = 1.0};
    snprintf (r->method, sizeof (r->method), "%s", method);
    snprintf (r->path, sizeof (r->path), "%s", path);
    static const struct {
        const char *name;
        enum fault_action a;
    } names[] = {
        {"drop", FAULT_DROP},
        {"garbage", FAULT_GARBAGE},
        {"wrong_types", FAULT_WRONG_TYPES},
        {"truncate", FAULT_TRUNCATE},
        {"slow_body", FAULT_SLOW_BODY},
        {"hostile_token", FAULT_HOSTILE_TOKEN},
        {"hostile_detail", FAULT_HOSTILE_DETAIL},
    };
    char *end;
    long status = strtol (action, &end, 10);
    if (*end == '\0' && status >= 100 && status <= 599) {
        r->action = FAULT_STATUS;
        r->status = (int)status;
    } else if (strncmp (action, "delay=", 6) == 0) {
        r->action = FAULT_DELAY;
        r->delay_ms = (unsigned)strtoul (action + 6, NULL, 10);
    } else if (strncmp (action, "pad=", 4) == 0) {
        unsigned long long pad = strtoull (action + 4, &end, 10);
        if (*end || end == action + 4 || pad > (1ULL << 30)) {
            snprintf (err, errlen, "pad=BYTES: a number of bytes up to 1 GiB");
            return -1;
        }
        r->action = FAULT_PAD;
        r->pad_bytes = (size_t)pad;
    } else {
        size_t i;
        for (i = 0; i < sizeof (names) / sizeof (names[0]); i++)
            if (strcmp (action, names[i].name) == 0)
                break;
        if (i == sizeof (names) / sizeof (names[0])) {
            snprintf (err, errlen, "unknown action '%s'", action);
            return -1;
        }
        r->action = names[i].a;
    }
    for (char *w; (w = strtok_r (NULL, " \t", &save));) {
        if (w[0] == 'x')
            r->remaining = strtol (w + 1, NULL, 10);
        else if (w[0] == 'p')
            r->probability = strtod (w + 1, NULL);
        else {
            snprintf (err, errlen, "unknown modifier '%s'", w);
            return -1;
        }
    }
    return 0;
}

/* Replace the rules with the script in 'text'.  Caller holds the lock. */
static int load_rules (const char *text, char *err, size_t errlen)
{
    struct fault_rule fresh[MOCK_MAX_RULES] = {0};
    unsigned n = 0;
    char *copy = strdup (text), *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r (copy, "\n", &save); line;
         line = strtok_r (NULL, "\n", &save)) {
        lineno++;
        while (*line == ' ' || *line == '\t')
            line++;
        if (*line == '\0' || *line == '#')
            continue;
        char inner[128];
        if (n == MOCK_MAX_RULES ||
            parse_rule (line, &fresh[n], inner, sizeof (inner)) < 0) {
            snprintf (err,
                      errlen,
                      "line %d: %s",
                      lineno,
                      n == MOCK_MAX_RULES ? "too many rules" : inner);
            free (copy);
            return -1;
        }
        n++;
    }
    free (copy);
    memcpy (rules, fresh, sizeof (fresh[0]) * n);
    nrules = n;
    return 0;
}

/* The rule that applies to this request, consumed; NULL if none. */
static bool match_rule (const char *method, const char *path, struct fault_rule *out)
{
    bool hit = false;
    pthread_mutex_lock (&lock);
    for (unsigned i = 0; i < nrules; i++) {
        struct fault_rule *r = &rules[i];
        if (r->remaining == 0)
            continue;
        if (strcmp (r->method, "*") != 0 && strcasecmp (r->method, method) != 0)
            continue;
        if (fnmatch (r->path, path, 0) != 0)
            continue;
        if (r->probability < 1.0 && (double)random () / RAND_MAX >= r->probability)
            continue;
        if (r->remaining > 0)
            r->remaining--;
        *out = *r;
        hit = true;
        break;
    }
    pthread_mutex_unlock (&lock);
    return hit;
}

/* ---- authentication ------------------------------------------------ */

static bool token_valid_locked (const char *value)
{
    time_t now = time (NULL);
    for (unsigned i = 0; i < ntokens; i++)
        if (strcmp (tokens[i].value, value) == 0)
            return tokens[i].expires > now;
    return false;
}

static const char *bearer (struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value (c, MHD_HEADER_KIND, "Authorization");
    if (h && strncasecmp (h, "Bearer ", 7) == 0)
        return h + 7;
    return NULL;
}

/* Workload-manager calls: check the admin credentials of --auth. */
static bool wlm_authorized (struct MHD_Connection *c)
{
    if (strcmp (arg_.auth, "none") == 0)
        return true;
    if (strcmp (arg_.auth, "basic") == 0) {
        char *pass = NULL;
        char *user = MHD_basic_auth_get_username_password (c, &pass);
        bool ok = user && pass && strcmp (user, "cxi") == 0 &&
                  strcmp (pass, cred_passwd) == 0;
        MHD_free (user);
        MHD_free (pass);
        return ok;
    }
    const char *tok = bearer (c);
    pthread_mutex_lock (&lock);
    bool ok = tok && token_valid_locked (tok);
    pthread_mutex_unlock (&lock);
    return ok;
}

/* Value of 'name' in an application/x-www-form-urlencoded body (raw, as
 * Slurm sends it: no percent-encoding of the values). */
static char *form_value (const char *body, const char *name)
{
    size_t n = strlen (name);
    for (const char *p = body; p && *p;
         p = strchr (p, '&') ? strchr (p, '&') + 1 : NULL) {
        if (strncmp (p, name, n) == 0 && p[n] == '=') {
            const char *v = p + n + 1;
            const char *end = strchr (v, '&');
            return strndup (v, end ? (size_t)(end - v) : strlen (v));
        }
    }
    return NULL;
}

static void handle_token (const char *body, struct reply *r)
{
    char *grant = form_value (body, "grant_type");
    char *id = form_value (body, "client_id");
    char *secret = form_value (body, "client_secret");
    if (!grant || strcmp (grant, "client_credentials") != 0)
        reply_set (r, 400, json_pack ("{s:s}", "error", "unsupported_grant_type"));
    else if (!id || !secret || strcmp (id, cred_client_id) != 0 ||
             strcmp (secret, cred_client_secret) != 0)
        reply_set (r, 401, json_pack ("{s:s}", "error", "invalid_client"));
    else {
        char value[65];
        random_hex (value, 32);
        pthread_mutex_lock (&lock);
        if (ntokens == MOCK_MAX_TOKENS) { /* keep the newest half */
            memmove (tokens, tokens + MOCK_MAX_TOKENS / 2, sizeof (tokens) / 2);
            ntokens = MOCK_MAX_TOKENS / 2;
        }
        snprintf (tokens[ntokens].value, sizeof (tokens[0].value), "%s", value);
        tokens[ntokens++].expires = time (NULL) + arg_.token_lifetime_s;
        stat_token_grants++;
        unsigned lifetime = arg_.token_lifetime_s;
        pthread_mutex_unlock (&lock);
        reply_set (r,
                   200,
                   json_pack ("{s:s, s:s, s:i}",
                              "access_token",
                              value,
                              "token_type",
                              "Bearer",
                              "expires_in",
                              (int)lifetime));
    }
    free (grant);
    free (id);
    if (secret)
        explicit_bzero (secret, strlen (secret));
    free (secret);
}

/* ---- the workload-manager side ------------------------------------- */

/* Caller holds the lock. */
static void free_tree_locked (int id)
{
    free (trees[id].job);
    free (trees[id].step);
    trees[id] = (struct tree){0};
    trees_used--;
}

static void free_step_trees_locked (const char *job, const char *step)
{
    for (int i = 0; i < MOCK_MCAST_IDS; i++)
        if (trees[i].used && strcmp (trees[i].job, job) == 0 &&
            (!step || strcmp (trees[i].step, step) == 0))
            free_tree_locked (i);
}

static void handle_jobs_list (struct reply *r)
{
    json_t *links = json_array ();
    const char *id;
    json_t *v;
    pthread_mutex_lock (&lock);
    json_object_foreach (jobs, id, v)
    {
        char link[512];
        snprintf (link, sizeof (link), JOBS_PREFIX "/%s", id);
        json_array_append_new (links, json_string (link));
    }
    pthread_mutex_unlock (&lock);
    reply_set (r,
               200,
               json_pack ("{s:I, s:o}",
                          "documentCount",
                          (json_int_t)json_array_size (links),
                          "documentLinks",
                          links));
}

static void handle_job_get (const char *id, struct reply *r)
{
    pthread_mutex_lock (&lock);
    json_t *job = json_object_get (jobs, id);
    if (job)
        reply_set (r, 200, json_deep_copy (job));
    pthread_mutex_unlock (&lock);
    if (!job)
        reply_error (r, 404, "no such job");
}

static void handle_job_create (json_t *body, struct reply *r)
{
    json_t *jid = json_object_get (body, "jobID");
    json_t *limit = json_object_get (body, "mcastLimit");
    if (!json_is_string (jid) || json_string_length (jid) == 0 ||
        json_string_length (jid) > 256 || strchr (json_string_value (jid), '/')) {
        reply_error (r, 400, "jobID must be a non-empty string without '/'");
        return;
    }
    if (!json_is_integer (limit) || json_integer_value (limit) < 0 ||
        json_integer_value (limit) > MOCK_MCAST_IDS) {
        reply_error (r, 400, "mcastLimit must be an integer 0..8192");
        return;
    }
    const char *id = json_string_value (jid);
    char token[65], link[512];
    random_hex (token, 32); /* 256 bits */
    snprintf (link, sizeof (link), JOBS_PREFIX "/%s", id);
    pthread_mutex_lock (&lock);
    if (json_object_get (jobs, id)) {
        pthread_mutex_unlock (&lock);
        reply_error (r, 409, "job exists");
        return;
    }
    json_t *job = json_pack ("{s:s, s:O, s:s, s:{}, s:s}",
                             "jobID",
                             id,
                             "mcastLimit",
                             limit,
                             "sessionToken",
                             token,
                             "jobSteps",
                             "documentSelfLink",
                             link);
    json_object_set (jobs, id, job);
    state_save ();
    pthread_mutex_unlock (&lock);
    reply_set (r, 201, job);
}

static void handle_job_patch (const char *id, json_t *body, struct reply *r)
{
    json_t *steps = json_object_get (body, "jobSteps");
    const char *step;
    json_t *v;
    if (!json_is_object (steps)) {
        reply_error (r, 400, "jobSteps must be an object");
        return;
    }
    json_object_foreach (steps, step, v)
    {
        if (!json_is_null (v)) {
            reply_error (r, 400, "jobSteps values must be null (delete)");
            return;
        }
    }
    pthread_mutex_lock (&lock);
    json_t *job = json_object_get (jobs, id);
    if (job) {
        json_t *js = json_object_get (job, "jobSteps");
        json_object_foreach (steps, step, v)
        {
            free_step_trees_locked (id, step);
            json_object_del (js, step);
        }
        state_save ();
        reply_set (r, 200, json_deep_copy (job));
    }
    pthread_mutex_unlock (&lock);
    if (!job)
        reply_error (r, 404, "no such job");
}

static void handle_job_delete (const char *id, struct reply *r)
{
    pthread_mutex_lock (&lock);
    bool found = json_object_get (jobs, id) != NULL;
    if (found) {
        free_step_trees_locked (id, NULL);
        json_object_del (jobs, id);
        state_save ();
    }
    pthread_mutex_unlock (&lock);
    if (found)
        reply_set (r, 200, json_pack ("{s:s, s:s}", "jobID", id, "message", "deleted"));
    else
        reply_error (r, 404, "no such job");
}

/* ---- the application side (libfabric) ------------------------------ */

/* "H:HH:HH" -> 20-bit NIC address; -1 if malformed. */
static long parse_nic (const char *s)
{
    unsigned a, b, c;
    char tail;
    if (sscanf (s, "%x:%x:%x%c", &a, &b, &c, &tail) != 3 || a > 0xf || b > 0xff ||
        c > 0xff)
        return -1;
    return (long)((a << 16) | (b << 8) | c);
}

/* The job whose session token this is; caller holds the lock. */
static json_t *job_by_token_locked (const char *tok, const char **ret_id)
{
    const char *id;
    json_t *job;
    if (!tok)
        return NULL;
    json_object_foreach (jobs, id, job)
    {
        const char *t = json_string_value (json_object_get (job, "sessionToken"));
        if (t && strcmp (t, tok) == 0) {
            *ret_id = id;
            return job;
        }
    }
    return NULL;
}

static bool root_in_use_locked (uint32_t nic)
{
    for (int i = 0; i < MOCK_MCAST_IDS; i++)
        if (trees[i].used && trees[i].root == nic)
            return true;
    return false;
}

static unsigned roots_in_use_locked (void)
{
    return trees_used; /* every tree has its own root */
}

static void handle_mcast_create (struct MHD_Connection *c,
                                 json_t *body,
                                 struct reply *r)
{
    json_t *macs = json_object_get (body, "macs");
    json_t *vni = json_object_get (body, "vni");
    json_t *timeout = json_object_get (body, "timeout");
    json_t *jid = json_object_get (body, "jobID");
    json_t *sid = json_object_get (body, "jobStepID");
    size_t i;
    json_t *m;
    if (!json_is_array (macs) || json_array_size (macs) == 0 ||
        !json_is_integer (vni) || !json_is_integer (timeout) || !json_is_string (jid) ||
        !json_is_string (sid)) {
        reply_error (
            r, 400, "need macs (non-empty array), vni, timeout, jobID, jobStepID");
        return;
    }
    json_array_foreach (macs, i, m)
    {
        if (!json_is_string (m) || parse_nic (json_string_value (m)) < 0) {
            reply_error (r, 400, "macs entries must be NIC addresses like 1:A2:B3");
            return;
        }
    }
    pthread_mutex_lock (&lock);
    const char *job_id = NULL;
    json_t *job = job_by_token_locked (bearer (c), &job_id);
    if (!job) {
        pthread_mutex_unlock (&lock);
        reply_error (r, 401, "invalid session token");
        return;
    }
    if (strcmp (job_id, json_string_value (jid)) != 0) {
        pthread_mutex_unlock (&lock);
        reply_error (r, 403, "session token does not belong to jobID");
        return;
    }
    unsigned used = 0;
    for (int k = 0; k < MOCK_MCAST_IDS; k++)
        if (trees[k].used && strcmp (trees[k].job, job_id) == 0)
            used++;
    json_int_t limit = json_integer_value (json_object_get (job, "mcastLimit"));
    const char *fail = NULL;
    int fail_status = 507;
    long root = -1;
    if ((json_int_t)used >= limit)
        fail = "01: job multicast address limit reached";
    else if (trees_used >= arg_.pool)
        fail = "02: no multicast addresses available";
    else if (arg_.max_roots && roots_in_use_locked () >= arg_.max_roots)
        fail = "03: no hwroot available";
    else {
        json_array_foreach (macs, i, m)
        {
            long nic = parse_nic (json_string_value (m));
            if (!root_in_use_locked ((uint32_t)nic)) {
                root = nic;
                break;
            }
        }
        if (root < 0) {
            fail = "hwroot in use";
            fail_status = 400;
        }
    }
    if (fail) {
        pthread_mutex_unlock (&lock);
        reply_error (r, fail_status, fail);
        return;
    }
    int id = 0;
    while (trees[id].used)
        id++;
    const char *step = json_string_value (sid);
    trees[id] = (struct tree){
        .used = true,
        .job = strdup (job_id),
        .step = strdup (step),
        .root = (uint32_t)root,
    };
    trees_used++;
    json_t *steps = json_object_get (job, "jobSteps");
    json_t *list = json_object_get (steps, step);
    if (!list) {
        list = json_array ();
        json_object_set_new (steps, step, list);
    }
    json_array_append_new (list, json_integer (id));
    state_save ();
    pthread_mutex_unlock (&lock);
    char hwroot[32], link[128];
    /* Six groups as the real FM sends them, the NIC address in the low 20
     * bits and the top three groups 0.  libfabric (2.6.0, cxip_coll.c)
     * ORs group k into a 32-bit value shifted by 8*k bits: the top two
     * shifts are past 32 bits, and on x86 they wrap, so a non-zero top
     * group lands in bits 8-15 ("02:" made it NIC | 0x200, a root no
     * member has: join error 2051, tree left at the FM).  Zeros decode
     * exactly whatever the compiler does. */
    snprintf (hwroot,
              sizeof (hwroot),
              "00:00:00:%02lx:%02lx:%02lx",
              (root >> 16) & 0xf,
              (root >> 8) & 0xff,
              root & 0xff);
    snprintf (link, sizeof (link), MCAST_PREFIX "/%d", id);
    reply_set (r,
               200,
               json_pack ("{s:i, s:s, s:O, s:O, s:s}",
                          "mcastID",
                          id,
                          "hwRoot",
                          hwroot,
                          "jobID",
                          jid,
                          "jobStepID",
                          sid,
                          "documentSelfLink",
                          link));
}

static void handle_mcast_delete (struct MHD_Connection *c,
                                 const char *idtext,
                                 struct reply *r)
{
    char *end;
    long id = strtol (idtext, &end, 10);
    if (*idtext == '\0' || *end || id < 0 || id >= MOCK_MCAST_IDS) {
        reply_error (r, 400, "mcastID must be 0..8191");
        return;
    }
    pthread_mutex_lock (&lock);
    const char *job_id = NULL;
    json_t *job = job_by_token_locked (bearer (c), &job_id);
    int status = 200;
    const char *msg = NULL;
    if (!job) {
        status = 401;
        msg = "invalid session token";
    } else if (!trees[id].used) {
        status = 404;
        msg = "no such multicast tree";
    } else if (strcmp (trees[id].job, job_id) != 0) {
        status = 403;
        msg = "tree belongs to another job";
    } else {
        json_t *list =
            json_object_get (json_object_get (job, "jobSteps"), trees[id].step);
        size_t i;
        json_t *v;
        json_array_foreach (list, i, v)
        {
            if (json_integer_value (v) == id) {
                json_array_remove (list, i);
                break;
            }
        }
        free_tree_locked ((int)id);
        state_save ();
    }
    pthread_mutex_unlock (&lock);
    if (msg)
        reply_error (r, status, msg);
    else
        reply_set (
            r, 200, json_pack ("{s:i, s:s}", "mcastID", (int)id, "message", "deleted"));
}

/* ---- control (tests only) ------------------------------------------ */

static json_int_t count_jobs (const char *prefix)
{
    json_int_t n = 0;
    const char *id;
    json_t *v;
    size_t len = strlen (prefix);
    json_object_foreach (jobs, id, v)
    {
        if (strncmp (id, prefix, len) == 0)
            n++;
    }
    return n;
}

static void handle_mock (const char *method,
                         const char *path,
                         const char *prefix,
                         const char *body,
                         struct reply *r)
{
    char err[160];
    if (strcmp (path, "/_mock/state") == 0 && strcmp (method, "GET") == 0) {
        pthread_mutex_lock (&lock);
        reply_set (r, 200, state_to_json (true));
        pthread_mutex_unlock (&lock);
    } else if (strcmp (path, "/_mock/count") == 0 && strcmp (method, "GET") == 0) {
        pthread_mutex_lock (&lock);
        json_int_t n = count_jobs (prefix ? prefix : "");
        pthread_mutex_unlock (&lock);
        reply_set (r, 200, json_pack ("{s:I}", "jobs", n));
    } else if (strcmp (path, "/_mock/faults") == 0 && strcmp (method, "POST") == 0) {
        pthread_mutex_lock (&lock);
        int rc = load_rules (body, err, sizeof (err));
        pthread_mutex_unlock (&lock);
        if (rc < 0)
            reply_error (r, 400, err);
        else
            reply_set (r, 200, json_pack ("{s:i}", "rules", (int)nrules));
    } else if (strcmp (path, "/_mock/faults") == 0 && strcmp (method, "DELETE") == 0) {
        pthread_mutex_lock (&lock);
        nrules = 0;
        pthread_mutex_unlock (&lock);
        reply_set (r, 200, json_object ());
    } else if (strcmp (path, "/_mock/restart") == 0 && strcmp (method, "POST") == 0) {
        pthread_mutex_lock (&lock);
        forget_all ();
        stat_restarts++;
        state_save ();
        pthread_mutex_unlock (&lock);
        reply_set (r, 200, json_object ());
    } else if (strcmp (path, "/_mock/expire-tokens") == 0 &&
               strcmp (method, "POST") == 0) {
        pthread_mutex_lock (&lock);
        for (unsigned i = 0; i < ntokens; i++)
            tokens[i].expires = 0;
        pthread_mutex_unlock (&lock);
        reply_set (r, 200, json_object ());
    } else if (strcmp (path, "/_mock/config") == 0 && strcmp (method, "POST") == 0) {
        json_t *o = json_loads (body, 0, NULL);
        json_int_t lifetime = -1, latency = -1, jitter = -1, pool = -1;
        if (!json_is_object (o) || json_unpack (o,
                                                "{s?I, s?I, s?I, s?I !}",
                                                "token_lifetime_s",
                                                &lifetime,
                                                "latency_ms",
                                                &latency,
                                                "jitter_ms",
                                                &jitter,
                                                "pool",
                                                &pool) < 0)
            reply_error (
                r, 400, "expected {token_lifetime_s, latency_ms, jitter_ms, pool}");
        else {
            pthread_mutex_lock (&lock);
            if (lifetime >= 0)
                arg_.token_lifetime_s = (unsigned)lifetime;
            if (latency >= 0)
                arg_.latency_ms = (unsigned)latency;
            if (jitter >= 0)
                arg_.jitter_ms = (unsigned)jitter;
            if (pool >= 0)
                arg_.pool = (unsigned)pool;
            pthread_mutex_unlock (&lock);
            reply_set (r, 200, json_object ());
        }
        json_decref (o);
    } else
        reply_error (r, 404, "no such control endpoint");
}

/* ---- routing ------------------------------------------------------- */

static bool is_json_request (json_t **out,
                             const char *body,
                             size_t len,
                             struct reply *r)
{
    json_error_t jerr;
    *out = json_loadb (body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object (*out)) {
        json_decref (*out);
        *out = NULL;
        reply_error (r, 400, "body must be a JSON object");
        return false;
    }
    return true;
}

static void route (struct MHD_Connection *c,
                   const char *method,
                   const char *path,
                   const char *body,
                   size_t len,
                   struct reply *r)
{
    json_t *json = NULL;
    size_t jl = strlen (JOBS_PREFIX), ml = strlen (MCAST_PREFIX);

    if (strcmp (path, "/oauth/token") == 0 && strcmp (arg_.auth, "oauth") == 0) {
        if (strcmp (method, "POST") != 0)
            reply_error (r, 405, "method not allowed");
        else
            handle_token (body, r);
        return;
    }
    if (strncmp (path, JOBS_PREFIX, jl) == 0 && (path[jl] == '\0' || path[jl] == '/')) {
        const char *id = path[jl] == '/' ? path + jl + 1 : "";
        if (!wlm_authorized (c)) {
            reply_error (r, 401, "unauthorized");
            return;
        }
        if (*id == '\0') {
            if (strcmp (method, "GET") == 0)
                handle_jobs_list (r);
            else if (strcmp (method, "POST") == 0) {
                if (is_json_request (&json, body, len, r))
                    handle_job_create (json, r);
            } else
                reply_error (r, 405, "method not allowed");
        } else if (strchr (id, '/'))
            reply_error (r, 404, "no such resource");
        else if (strcmp (method, "GET") == 0)
            handle_job_get (id, r);
        else if (strcmp (method, "PATCH") == 0) {
            if (is_json_request (&json, body, len, r))
                handle_job_patch (id, json, r);
        } else if (strcmp (method, "DELETE") == 0)
            handle_job_delete (id, r);
        else
            reply_error (r, 405, "method not allowed");
    } else if (strncmp (path, MCAST_PREFIX, ml) == 0 &&
               (path[ml] == '\0' || path[ml] == '/')) {
        if (path[ml] == '\0' && strcmp (method, "POST") == 0) {
            if (is_json_request (&json, body, len, r))
                handle_mcast_create (c, json, r);
        } else if (path[ml] == '/' && strcmp (method, "DELETE") == 0)
            handle_mcast_delete (c, path + ml + 1, r);
        else
            reply_error (r, 405, "method not allowed");
    } else
        reply_error (r, 404, "no such resource");
    json_decref (json);
}

/* ---- MHD glue ------------------------------------------------------ */

struct request {
    char *body;
    size_t len;
    bool too_large;
};

/* Break the reply's known fields' JSON types, as a broken FM might. */
static void make_wrong_types (json_t *body)
{
    if (json_object_get (body, "sessionToken"))
        json_object_set_new (body, "sessionToken", json_integer (12345));
    if (json_object_get (body, "documentLinks"))
        json_object_set_new (
            body, "documentLinks", json_string ("/fabric/collectives/jobs/x"));
    if (json_object_get (body, "mcastID"))
        json_object_set_new (body, "mcastID", json_string ("7"));
    if (json_object_get (body, "access_token"))
        json_object_set_new (body, "access_token", json_true ());
}

struct trickle {
    char *text;
    size_t len;
    bool truncate;
};

static ssize_t trickle_cb (void *cls, uint64_t pos, char *buf, size_t max)
{
    struct trickle *t = cls;
    if (t->truncate) {
        if (pos >= t->len / 2)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        size_t n = t->len / 2 - (size_t)pos;
        if (n > max)
            n = max;
        memcpy (buf, t->text + pos, n);
        return (ssize_t)n;
    }
    if (pos >= t->len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    sleep_ms (200);
    buf[0] = t->text[pos];
    return 1;
}

static void trickle_free (void *cls)
{
    struct trickle *t = cls;
    free (t->text);
    free (t);
}

static void log_request (const char *method, const char *path, const char *outcome)
{
    if (!request_log)
        return;
    pthread_mutex_lock (&lock);
    fprintf (request_log, "%s %s %s\n", method, path, outcome);
    fflush (request_log);
    pthread_mutex_unlock (&lock);
}

static bool client_cert_ok (struct MHD_Connection *c)
{
    if (!arg_.tls_client_ca)
        return true;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    unsigned status = 0;
    if (!ci || !ci->tls_session)
        return false;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    if (gnutls_certificate_get_peers (s, NULL) == NULL)
        return false;
    return gnutls_certificate_verify_peers2 (s, &status) == 0 && status == 0;
}

static enum MHD_Result send_reply (struct MHD_Connection *c, struct reply *r)
{
    char *text = r->body ? json_dumps (r->body, JSON_COMPACT) : strdup ("");
    struct MHD_Response *resp;
    if (r->shape == FAULT_GARBAGE) {
        free (text);
        text = strdup ("<html><body>502 Bad Gateway</body></html>");
    }
    if (r->shape == FAULT_PAD && text) {
        size_t len = strlen (text);
        char *padded = realloc (text, len + r->pad_bytes + 1);
        if (padded) {
            memset (padded + len, ' ', r->pad_bytes);
            padded[len + r->pad_bytes] = '\0';
            text = padded;
        }
    }
    if (r->shape == FAULT_TRUNCATE || r->shape == FAULT_SLOW_BODY) {
        struct trickle *t = calloc (1, sizeof (*t));
        t->text = text;
        t->len = strlen (text);
        t->truncate = r->shape == FAULT_TRUNCATE;
        resp =
            MHD_create_response_from_callback (t->len, 1, trickle_cb, t, trickle_free);
    } else
        resp = MHD_create_response_from_buffer (
            strlen (text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header (
        resp,
        "Content-Type",
        r->shape == FAULT_GARBAGE ? "text/html" : "application/json");
    enum MHD_Result ret = MHD_queue_response (c, (unsigned)r->status, resp);
    MHD_destroy_response (resp);
    return ret;
}

static enum MHD_Result access_cb (void *cls,
                                  struct MHD_Connection *c,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_size,
                                  void **con_cls)
{
    (void)cls;
    (void)version;
    struct request *req = *con_cls;
    if (!req) {
        *con_cls = calloc (1, sizeof (*req));
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        if (req->len + *upload_size > MOCK_MAX_BODY)
            req->too_large = true;
        else {
            char *nb = realloc (req->body, req->len + *upload_size + 1);
            if (!nb)
                return MHD_NO;
            memcpy (nb + req->len, upload_data, *upload_size);
            req->body = nb;
            req->len += *upload_size;
            req->body[req->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    const char *body = req->body ? req->body : "";
    struct reply r = {0};
    bool control = strncmp (url, "/_mock/", 7) == 0;

    if (control) {
        handle_mock (method,
                     url,
                     MHD_lookup_connection_value (c, MHD_GET_ARGUMENT_KIND, "prefix"),
                     body,
                     &r);
        enum MHD_Result ret = send_reply (c, &r);
        json_decref (r.body);
        return ret;
    }

    int now = atomic_fetch_add (&concurrency, 1) + 1;
    pthread_mutex_lock (&lock);
    if (now > max_concurrency)
        max_concurrency = now;
    stat_requests++;
    unsigned latency = arg_.latency_ms, jitter = arg_.jitter_ms;
    pthread_mutex_unlock (&lock);
    if (latency || jitter)
        sleep_ms (latency + (jitter ? (unsigned)random () % (jitter + 1) : 0));

    struct fault_rule rule;
    bool faulted = match_rule (method, url, &rule);
    if (faulted && rule.action == FAULT_DELAY) {
        sleep_ms (rule.delay_ms);
        faulted = false;
    }
    if (faulted && rule.action == FAULT_DROP)
        r.drop = true;
    else if (faulted && rule.action == FAULT_STATUS) {
        char msg[64];
        snprintf (msg,
                  sizeof (msg),
                  "%s",
                  rule.status == 507 ? "02: injected fault" : "injected fault");
        reply_error (&r, rule.status, msg);
    } else if (faulted && rule.action == FAULT_HOSTILE_DETAIL)
        reply_error (&r, 500, "injected\n<2>fmbrokerd: CRIT forged by the FM");
    else if (!client_cert_ok (c))
        reply_error (&r, 403, "client certificate required");
    else if (req->too_large)
        reply_error (&r, 413, "request body too large");
    else {
        route (c, method, url, body, req->len, &r);
        if (faulted) {
            r.shape = rule.action;
            r.pad_bytes = rule.pad_bytes;
            if (rule.action == FAULT_WRONG_TYPES && r.body)
                make_wrong_types (r.body);
            if (rule.action == FAULT_HOSTILE_TOKEN && r.body &&
                json_object_get (r.body, "sessionToken"))
                json_object_set_new (
                    r.body,
                    "sessionToken",
                    json_string ("tok12345\nexport LD_PRELOAD=/tmp/evil.so"));
        }
    }
    enum MHD_Result ret;
    if (r.drop) {
        log_request (method, url, "drop");
        ret = MHD_NO;
    } else {
        /* A 507's "NN:" sub-code is what libfabric tells apart (01 job
         * limit, 02 no addresses, 03 no hwroot): the log names it. */
        const char *msg = json_string_value (json_object_get (r.body, "message"));
        char outcome[16];
        if (r.status == 507 && msg && strlen (msg) >= 3 && msg[2] == ':')
            snprintf (outcome, sizeof (outcome), "%d %.3s", r.status, msg);
        else
            snprintf (outcome, sizeof (outcome), "%d", r.status);
        log_request (method, url, outcome);
        ret = send_reply (c, &r);
    }
    json_decref (r.body);
    atomic_fetch_sub (&concurrency, 1);
    return ret;
}

static void completed_cb (void *cls,
                          struct MHD_Connection *c,
                          void **con_cls,
                          enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct request *req = *con_cls;
    if (req) {
        free (req->body);
        free (req);
        *con_cls = NULL;
    }
}

/* ---- start-up ------------------------------------------------------ */

static char *read_secret (const char *dir, const char *name, bool must_be_private)
{
    char path[1024];
    char *buf;
    struct fmb_error e;
    snprintf (path, sizeof (path), "%s/%s", dir, name);
    if ((must_be_private && fmb_check_private_file (path, &e) < 0) ||
        fmb_read_file (path, 4096, true, &buf, NULL, &e) < 0) {
        fprintf (stderr, "mockfm: %s\n", e.text);
        exit (2);
    }
    return buf;
}

static char *read_pem (const char *path)
{
    char *buf;
    struct fmb_error e;
    if (fmb_read_file (path, 1024 * 1024, false, &buf, NULL, &e) < 0) {
        fprintf (stderr, "mockfm: %s\n", e.text);
        exit (2);
    }
    return buf;
}

static void usage (int status)
{
    fputs (
        "Usage: mockfm [--listen HOST:PORT] [--port-file FILE] [--auth "
        "oauth|basic|none]\n"
        "              [--auth-dir DIR] [--token-lifetime S] [--pool N] [--max-roots "
        "N]\n"
        "              [--latency MS] [--jitter MS] [--faults FILE] [--request-log "
        "FILE]\n"
        "              [--state-file FILE [--state-readonly]] [--tls-cert PEM "
        "--tls-key PEM "
        "[--tls-client-ca PEM]]\n"
        "A mock Slingshot fabric manager for tests; see the header of mockfm.c.\n",
        status ? stderr : stdout);
    exit (status);
}

int main (int argc, char **argv)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"port-file", required_argument, NULL, 'p'},
        {"auth", required_argument, NULL, 'a'},
        {"auth-dir", required_argument, NULL, 'd'},
        {"token-lifetime", required_argument, NULL, 't'},
        {"pool", required_argument, NULL, 'P'},
        {"max-roots", required_argument, NULL, 'R'},
        {"latency", required_argument, NULL, 'L'},
        {"jitter", required_argument, NULL, 'J'},
        {"faults", required_argument, NULL, 'f'},
        {"request-log", required_argument, NULL, 'r'},
        {"state-file", required_argument, NULL, 's'},
        {"state-readonly", no_argument, NULL, 'O'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-client-ca", required_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long (argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            arg_.listen = optarg;
            break;
        case 'p':
            arg_.port_file = optarg;
            break;
        case 'a':
            arg_.auth = optarg;
            break;
        case 'd':
            arg_.auth_dir = optarg;
            break;
        case 't':
            arg_.token_lifetime_s = (unsigned)strtoul (optarg, NULL, 10);
            break;
        case 'P':
            arg_.pool = (unsigned)strtoul (optarg, NULL, 10);
            break;
        case 'R':
            arg_.max_roots = (unsigned)strtoul (optarg, NULL, 10);
            break;
        case 'L':
            arg_.latency_ms = (unsigned)strtoul (optarg, NULL, 10);
            break;
        case 'J':
            arg_.jitter_ms = (unsigned)strtoul (optarg, NULL, 10);
            break;
        case 'f':
            arg_.faults = optarg;
            break;
        case 'r':
            arg_.request_log = optarg;
            break;
        case 's':
            arg_.state_file = optarg;
            break;
        case 'O':
            arg_.state_readonly = true;
            break;
        case 'C':
            arg_.tls_cert = optarg;
            break;
        case 'K':
            arg_.tls_key = optarg;
            break;
        case 'A':
            arg_.tls_client_ca = optarg;
            break;
        case 'h':
            usage (0);
            break;
        default:
            usage (2);
        }
    }
    if (optind < argc || arg_.pool > MOCK_MCAST_IDS)
        usage (2);
    srandom ((unsigned)time (NULL) ^ (unsigned)getpid ());
    jobs = json_object ();
    state_load ();

    if (strcmp (arg_.auth, "oauth") == 0 || strcmp (arg_.auth, "basic") == 0) {
        if (!arg_.auth_dir) {
            fprintf (stderr, "mockfm: --auth %s needs --auth-dir\n", arg_.auth);
            return 2;
        }
        if (arg_.auth[0] == 'o') {
            cred_client_id = read_secret (arg_.auth_dir, "client-id", false);
            cred_client_secret = read_secret (arg_.auth_dir, "client-secret", true);
        } else
            cred_passwd = read_secret (arg_.auth_dir, "passwd", true);
    } else if (strcmp (arg_.auth, "none") != 0)
        usage (2);
    if (arg_.faults) {
        char *text, err[160];
        struct fmb_error e;
        if (fmb_read_file (arg_.faults, 1024 * 1024, false, &text, NULL, &e) < 0) {
            fprintf (stderr, "mockfm: %s\n", e.text);
            return 2;
        }
        if (load_rules (text, err, sizeof (err)) < 0) {
            fprintf (stderr, "mockfm: %s: %s\n", arg_.faults, err);
            return 2;
        }
        free (text);
    }
    if (arg_.request_log && !(request_log = fopen (arg_.request_log, "a"))) {
        fprintf (stderr, "mockfm: %s: %s\n", arg_.request_log, strerror (errno));
        return 2;
    }

    /* Block the stop signals before MHD starts its threads, so that they
     * inherit the mask and only sigwait() below receives them. */
    sigset_t set;
    sigemptyset (&set);
    sigaddset (&set, SIGTERM);
    sigaddset (&set, SIGINT);
    pthread_sigmask (SIG_BLOCK, &set, NULL);

    struct sockaddr_storage ss;
    socklen_t sslen;
    if (fmb_parse_hostport (arg_.listen, &ss, &sslen) < 0) {
        fprintf (stderr, "mockfm: --listen %s: expected HOST:PORT\n", arg_.listen);
        return 2;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    char *cert = NULL, *key = NULL, *ca = NULL;
    if (arg_.tls_cert || arg_.tls_key) {
        if (!arg_.tls_cert || !arg_.tls_key)
            usage (2);
        flags |= MHD_USE_TLS;
        cert = read_pem (arg_.tls_cert);
        key = read_pem (arg_.tls_key);
        if (arg_.tls_client_ca)
            ca = read_pem (arg_.tls_client_ca);
    }
    struct MHD_OptionItem tls_opts[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
        {cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
        {ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, ca},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *d = MHD_start_daemon (flags,
                                             0,
                                             NULL,
                                             NULL,
                                             access_cb,
                                             NULL,
                                             MHD_OPTION_SOCK_ADDR,
                                             (struct sockaddr *)&ss,
                                             MHD_OPTION_NOTIFY_COMPLETED,
                                             completed_cb,
                                             NULL,
                                             MHD_OPTION_CONNECTION_TIMEOUT,
                                             (unsigned)60,
                                             MHD_OPTION_ARRAY,
                                             tls_opts,
                                             MHD_OPTION_END);
    if (!d) {
        fprintf (stderr, "mockfm: cannot listen on %s\n", arg_.listen);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info (d, MHD_DAEMON_INFO_BIND_PORT);
    if (arg_.port_file) {
        char text[16];
        struct fmb_error e;
        snprintf (text, sizeof (text), "%u\n", di->port);
        if (fmb_write_file_atomic (arg_.port_file, 0644, text, strlen (text), &e) < 0) {
            fprintf (stderr, "mockfm: %s\n", e.text);
            return 1;
        }
    }
    fprintf (stderr, "mockfm: listening on port %u (auth %s)\n", di->port, arg_.auth);

    int sig;
    sigwait (&set, &sig);
    MHD_stop_daemon (d);
    pthread_mutex_lock (&lock);
    forget_all ();
    json_decref (jobs);
    pthread_mutex_unlock (&lock);
    free (cert);
    free (key);
    free (ca);
    free (cred_client_id);
    free (cred_client_secret);
    free (cred_passwd);
    if (request_log)
        fclose (request_log);
    return 0;
}
