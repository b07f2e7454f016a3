/* fmclient.h: the fabric manager's collectives REST dialect over libcurl.
 *
 * All FM HTTP of fmbroker lives here.  Calls are asynchronous: each takes
 * a completion callback and runs on one libcurl multi handle, so many FM
 * calls proceed at once under a loop the caller drives (fmc_pollfds,
 * fmc_timeout_ms, fmc_process), with connections reused and capped.
 *
 * Paths, relative to the configured base URL (see DESIGN section 2):
 *   GET    /fabric/collectives/jobs/{id}      fmc_job_get
 *   POST   /fabric/collectives/jobs           fmc_job_create
 *   PATCH  /fabric/collectives/jobs/{id}      fmc_job_delete_step
 *   DELETE /fabric/collectives/jobs/{id}      fmc_job_delete
 *   GET    /fabric/collectives/jobs/          fmc_job_list
 *   GET    /fabric/collectives/jobs/{id}      fmc_probe (liveness)
 * and fmc_job_reserve (GET then POST, or POST first), the idempotent
 * reservation that RUN uses; and
 *          /fabric/collectives/multicasts     fmc_multicast_url (for apps)
 *
 * Authentication as Slurm's switch/hpe_slingshot does it, from the same
 * files: oauth reads AUTH_DIR/{endpoint,client-id,client-secret} at every
 * token fetch; basic sends user "cxi" with AUTH_DIR/passwd.  The OAuth
 * token is fetched on first use (or fmc_login), refreshed before
 * expires_in runs out, and fetched once more after a 401/403, when the
 * request is repeated once.  Secret files that group or others can read
 * are refused.  TLS verification is on unless 'insecure'.
 *
 * No token, password or secret appears in any error text.
 */
#ifndef FMB_FMCLIENT_H
#define FMB_FMCLIENT_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "error.h"

/* The largest FM answer read: the job listing, at ~47 bytes a job
 * ("/fabric/collectives/jobs/perlmutter-12345678", quoted, a comma),
 * holds ~350,000 jobs in 16 MiB.  (4 MiB, which held 100,000 only with
 * ids of about 13 characters or fewer -- each entry spends ~28 bytes on
 * the path, quotes and comma -- stopped reconciliation at the scale the
 * broker is built for.)  Parsed off the loop; the broker's resident
 * size grew by 23 MB while it read 120,000 jobs and by 67 MB for 340,000
 * (measured: ~200 bytes a job). */
#define FMC_MAX_REPLY (16 * 1024 * 1024)
#define FMC_JOBS_PATH "/fabric/collectives/jobs"
/* Where applications (libfabric's CXI provider) make their multicast
 * trees: the broker hands it out in a job's environment. */
#define FMC_MULTICASTS_PATH "/fabric/collectives/multicasts"

struct fmc;

struct fmc_config {
    const char *url; /* base URL, no trailing slash */
    enum fmb_auth auth;
    const char *auth_dir;
    const char *ca_file;   /* NULL or "": the system CA store */
    const char *mtls_cert; /* both or neither */
    const char *mtls_key;
    bool insecure;
    unsigned timeout_ms;
    unsigned max_connections;
};

enum fmc_status {
    FMC_OK,
    FMC_NOT_FOUND,    /* 404: no such job (GET, PATCH, DELETE) */
    FMC_RETRYABLE,    /* connect error, timeout, 408/409/425/429, 5xx: try later */
    FMC_PERMANENT,    /* another 4xx, a malformed answer, a TLS verification failure */
    FMC_UNAUTHORIZED, /* 401/403 even with a fresh token, or credentials refused */
    FMC_NOT_SENT,     /* withdrawn by fmc_drop_held before it left */
};

/* The FM calls, in the order the broker's metrics list them: the one
 * list of them, so that a new call cannot be left out anywhere that
 * loops over them (FMC_OP_COUNT).  "login" is the no-op call that waits
 * for a token: never observed, its series stay at zero. */
#define FMC_OPS(X)       \
    X (GET, "get")       \
    X (CREATE, "create") \
    X (PATCH, "patch")   \
    X (DELETE, "delete") \
    X (LIST, "list")     \
    X (TOKEN, "token")   \
    X (LOGIN, "login")   \
    X (PROBE, "probe")

enum fmc_op {
#define FMC_OP_ENUM(name, text) FMC_OP_##name,
    FMC_OPS (FMC_OP_ENUM)
#undef FMC_OP_ENUM
        FMC_OP_COUNT,
    /* Not an FM call: fmc_job_reserve could not make its next call.  Only
     * in a reservation's result, never observed. */
    FMC_OP_RESERVE = FMC_OP_COUNT,
};

/* "get", "create", ... ("reserve" for FMC_OP_RESERVE); "?" for no op. */
const char *fmc_op_name (enum fmc_op op);

/* Why a call got no HTTP answer, for a tool that names the fix (fmbrokerd
 * --check-config --fm); FMC_NET_NONE when no transfer failed. */
enum fmc_net {
    FMC_NET_NONE,
    FMC_NET_CONNECT, /* nothing accepted the connection (the port?) */
    FMC_NET_RESOLVE, /* the host name does not resolve */
    FMC_NET_TLS,     /* the FM's certificate does not verify (the CA?) */
    FMC_NET_TIMEOUT, /* no answer within timeout_ms */
    FMC_NET_OTHER,
};

struct fmc_result {
    enum fmc_status status;
    enum fmc_op op;
    long http_status; /* 0 when there was no HTTP answer */
    enum fmc_net net; /* with http_status 0: why */
    /* it never left this host: its deadline passed while it was held for
     * a commit, or before a late token let it go (one that expires while
     * it waits for the token counts: the token endpoint is the FM's).
     * Says nothing about the FM; not observed. */
    bool unsent;
    /* from first leaving (if it never did: submission) to completion */
    unsigned elapsed_ms;
    const char *error;         /* "" when status is FMC_OK */
    const char *session_token; /* get, create, reserve: the job's token */
    long mcast_limit;          /* get, create, reserve: -1 if the FM did not say */
    bool created;              /* reserve: the POST made it (the FM had none) */
    /* 404 to a path every collectives API has (the jobs listing, the
     * POST that creates a job): the configured url leads to none */
    bool no_api;
    const char *const *job_ids; /* list: the FM job ids ("cluster-job") */
    size_t njob_ids;
    struct fmc_req *req_; /* fmclient's own (fmc_take_job_ids) */
};

/* Everything in 'res' is borrowed for the duration of the call.  A call
 * that fails before reaching the network (a deadline already passed, no
 * token to be had) may complete before the function that started it
 * returns; a return of -1 means the callback will never run. */
typedef void (*fmc_done_f) (const struct fmc_result *res, void *arg);

/* Reads and checks the credentials (files, modes) now, so that a bad
 * setup fails at start rather than at the first job. */
int fmc_create (const struct fmc_config *cfg,
                struct fmc **ret,
                struct fmb_error *error);
/* The client for cfg's [fabric_manager] section (errors name it): none
 * (*ret NULL, return 0) when it has no url, for the broker's VNI-only mode. */
int fmc_create_from_config (const struct fmb_config *cfg,
                            struct fmc **ret,
                            struct fmb_error *error);
/* In-flight calls are abandoned without their callbacks. */
void fmc_destroy (struct fmc *fmc);

/* The FM's multicast URL applications use: base URL + FMC_MULTICASTS_PATH. */
const char *fmc_multicast_url (const struct fmc *fmc);

/* Called for every FM request that completes (token fetches included;
 * not for calls withdrawn before they left, nor for the internal "login"
 * wait), before its own callback: a reservation's GET that answered 404
 * and the POST after it are two calls.  For metrics. */
typedef void (*fmc_observer_f) (const struct fmc_result *res, void *arg);
void fmc_set_observer (struct fmc *fmc, fmc_observer_f fn, void *arg);

int fmc_job_get (struct fmc *fmc,
                 const char *fm_job_id,
                 fmc_done_f cb,
                 void *arg,
                 struct fmb_error *error);
/* GET /fabric/collectives/jobs/{id} as a liveness check (op "probe"):
 * one small request on the collectives API itself, where a listing may
 * be megabytes.  An answer of 200 or 404 (no such job) is FMC_OK: the
 * API answered; anything else is classified as for fmc_job_get. */
int fmc_probe (struct fmc *fmc,
               const char *fm_job_id,
               fmc_done_f cb,
               void *arg,
               struct fmb_error *error);
int fmc_job_create (struct fmc *fmc,
                    const char *fm_job_id,
                    unsigned mcast_limit,
                    fmc_done_f cb,
                    void *arg,
                    struct fmb_error *error);
/* Reserve the job at the FM, all within 'deadline_ms' from now (past it
 * the result is FMC_RETRYABLE).
 *   FMC_RESERVE_GET_FIRST: GET the job; on 404 POST it.
 *   FMC_RESERVE_POST_FIRST, for a job the caller never asked the FM to
 *     reserve before (no earlier intent of it was committed): the POST
 *     first, held like any change (fmc_hold; not holding, GET first as
 *     above).  One call instead of two for every new job.
 * If the FM answers the POST with anything but 2xx or 401/403 (409:
 * someone made it in between; what the real FM answers to a duplicate
 * create is not recorded), GET it again: the job it finds, else the
 * POST's answer (with what the GET said). */
enum fmc_reserve_order { FMC_RESERVE_GET_FIRST, FMC_RESERVE_POST_FIRST };
int fmc_job_reserve (struct fmc *fmc,
                     const char *fm_job_id,
                     unsigned mcast_limit,
                     unsigned deadline_ms,
                     enum fmc_reserve_order order,
                     fmc_done_f cb,
                     void *arg,
                     struct fmb_error *error);
/* The caller no longer wants the reservations of 'fm_job_id' in flight:
 * each whose GET is out ends without its POST (FMC_NOT_SENT) unless that
 * has left already.  A POST that went first is held with the caller's
 * other changes: fmc_drop_held withdraws it, this call does not.
 * Returns how many there were. */
int fmc_job_reserve_abandon (struct fmc *fmc, const char *fm_job_id);
/* PATCH {"jobSteps":{step:null}}: release one step's multicast trees. */
int fmc_job_delete_step (struct fmc *fmc,
                         const char *fm_job_id,
                         const char *step_id,
                         fmc_done_f cb,
                         void *arg,
                         struct fmb_error *error);
int fmc_job_delete (struct fmc *fmc,
                    const char *fm_job_id,
                    fmc_done_f cb,
                    void *arg,
                    struct fmb_error *error);
int fmc_job_list (struct fmc *fmc, fmc_done_f cb, void *arg, struct fmb_error *error);
/* In a listing's callback: keep its ids rather than copy them (100,000
 * strdup's and frees on a loop).  One allocation, 'job_ids' itself
 * (NULL-terminated, the strings after the pointers), the caller's to
 * free(); NULL for any other result or once taken. */
const char **fmc_take_job_ids (const struct fmc_result *res);
/* Fetch an OAuth token now (op "token"); with basic or none, completes OK
 * without a request. */
int fmc_login (struct fmc *fmc, fmc_done_f cb, void *arg, struct fmb_error *error);

/* ---- driving it from an event loop --------------------------------- */

/* The sockets to wait on: fills up to 'max' entries, returns how many. */
int fmc_pollfds (struct fmc *fmc, struct pollfd *fds, int max);
/* Milliseconds until fmc_process must run even without socket activity;
 * -1 when nothing is pending. */
int fmc_timeout_ms (struct fmc *fmc);
/* Handle what poll() reported for the fds fmc_pollfds gave (n may be 0),
 * and due timers; runs completion callbacks, for about
 * FMC_PROCESS_BUDGET_US at most: the calls that ended beyond that (64
 * releases answered together, each written to a store) are answered by
 * the next fmc_process, which fmc_timeout_ms then asks for at once.
 * (4 ms let a release storm's passes reach 33-40 ms with their commit;
 * 2 ms, 15-17 ms: bench 5.) */
#define FMC_PROCESS_BUDGET_US 2000
/* It reads at most FMC_PROCESS_READ_MAX bytes of answers (and only within
 * FMC_PROCESS_BUDGET_US): a larger answer is paused and read on by the
 * next calls, which fmc_timeout_ms asks for at once. */
#define FMC_PROCESS_READ_MAX (1024 * 1024)
void fmc_process (struct fmc *fmc, const struct pollfd *fds, int n);
/* Calls leave as soon as they are submitted, except that while holding,
 * those that change the FM (create, patch, delete) wait for
 * fmc_start_held: the broker holds them while the transaction that
 * records their intent is open, and starts them once it committed.  Reads
 * (get, list, token) and the POST of a reservation whose GET answered are
 * never held.  fmc_start_held runs no callback unless a call cannot leave
 * (curl cannot start it, or its deadline passed while it was held: both
 * complete FMC_RETRYABLE, the second 'unsent'); what ends later is seen
 * by the next fmc_process.  It
 * starts calls for about FMC_START_BUDGET_US: the rest (a storm of
 * releases) stay kept, in order, for the next fmc_start_held (or
 * fmc_run), which fmc_timeout_ms asks for at once. */
#define FMC_START_BUDGET_US 2000
void fmc_hold (struct fmc *fmc, bool on);
void fmc_start_held (struct fmc *fmc);
/* The held calls' intent committed, but they are to leave a little later
 * (after the answers of the same commit): the next fmc_start_held starts
 * them (within its budget), and fmc_drop_held no longer touches them. */
void fmc_keep_held (struct fmc *fmc);
/* The intent of the held calls did not commit: complete each, unsent,
 * with FMC_NOT_SENT. */
void fmc_drop_held (struct fmc *fmc);
/* Calls submitted and not yet completed. */
unsigned fmc_inflight (struct fmc *fmc);
/* Drive until nothing is in flight or 'timeout_ms' passes (-1 with
 * ETIMEDOUT).  For tools and tests, not for the broker's loop. */
int fmc_run (struct fmc *fmc, int timeout_ms);

/* OAuth tokens fetched so far (for status pages and tests). */
unsigned long fmc_token_fetches (struct fmc *fmc);
/* Listings whose answer was parsed on fmc's parser thread rather than
 * the caller's: the JSON of 100,000 FM entries takes long enough to
 * stall a loop.  Their callbacks still run in fmc_process, on the
 * caller's thread; fmc_pollfds includes the parser's fd while one is
 * being parsed. (For tests.) */
unsigned long fmc_offloop_parses (struct fmc *fmc);
/* Calls whose intent committed that wait to be started (for tests). */
unsigned fmc_kept (struct fmc *fmc);
/* Answers paused because an fmc_process had read its share (for tests). */
unsigned long fmc_read_pauses (struct fmc *fmc);

const char *fmc_status_name (enum fmc_status s);

/* The FM answer parsers (pure; fuzzed).  A job object: its sessionToken
 * (borrowed from 'body') and mcastLimit (-1 if absent); EPROTO without a
 * token.  A jobs listing: the ids after "/fabric/collectives/jobs/" in
 * documentLinks, borrowed from 'body', in a malloc'd array (caller frees
 * the array); EPROTO without documentLinks.  A job's token must be safe
 * (fmc_token_is_safe): EBADMSG if not. */
int fmc_reply_job (json_t *body, const char **token, long *mcast_limit);
/* A session token the broker hands out: FMC_TOKEN_RULE.  fmc_reply_job
 * refuses any other with EBADMSG (the reservation is then unusable). */
#define FMC_TOKEN_MIN  8
#define FMC_TOKEN_MAX  255 /* a bearer token the broker's API accepts */
#define FMC_TOKEN_RULE "8-255 characters of [A-Za-z0-9._~+/=:-]"
bool fmc_token_is_safe (const char *token, size_t len);
int fmc_reply_list (json_t *body, const char ***ids, size_t *n);

#endif
