/* fabric.h: what the job logic needs from a fabric's collective service.
 *
 * The broker's job logic talks to this interface only, in the spirit of
 * the 2001 switch-manager design: the fabric returns opaque per-job data
 * (here a session token) and the rest of the broker is neutral.  The one
 * implementation is the HPE fabric manager (fabric_fm.c, over fmclient);
 * with no [fabric_manager] url there is no fabric and the broker runs
 * VNI-only.
 */
#ifndef FMB_FABRIC_H
#define FMB_FABRIC_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "error.h"

enum fabric_status {
    FABRIC_OK,
    FABRIC_NOT_FOUND,
    FABRIC_RETRYABLE,
    FABRIC_PERMANENT,
    FABRIC_UNAUTHORIZED,
    FABRIC_NOT_SENT, /* withdrawn by fabric_drop_held: the FM never saw it */
};

struct fabric_result {
    enum fabric_status status;
    const char *op;   /* "get", "create", "patch", "delete", "list", "token", "login" */
    long http_status; /* 0: the fabric did not answer at all */
    unsigned elapsed_ms;
    const char *error;          /* "" on success */
    const char *token;          /* reserve: the job's session token */
    bool created;               /* reserve: made now rather than found */
    const char *const *job_ids; /* list */
    size_t njob_ids;
};

typedef void (*fabric_done_f) (const struct fabric_result *res, void *arg);

struct fabric;

/* NULL (no fabric) when cfg has no [fabric_manager] url. */
int fabric_create (const struct fmb_config *cfg,
                   struct fabric **ret,
                   struct fmb_error *error);
void fabric_destroy (struct fabric *f);

/* Call 'fn' for every request the fabric completes (each HTTP call of a
 * reservation, token fetches), for metrics. */
void fabric_set_observer (struct fabric *f, fabric_done_f fn, void *arg);

/* The URL applications use for their multicast trees (env). */
const char *fabric_app_url (struct fabric *f);

int fabric_reserve (struct fabric *f,
                    const char *fm_job_id,
                    unsigned mcast_limit,
                    unsigned deadline_ms,
                    fabric_done_f cb,
                    void *arg,
                    struct fmb_error *error);
/* Its intent did not commit: the reservation ends without creating
 * anything at the FM, unless the create has left already. */
void fabric_reserve_abandon (struct fabric *f, const char *fm_job_id);
int fabric_release_job (struct fabric *f,
                        const char *fm_job_id,
                        fabric_done_f cb,
                        void *arg,
                        struct fmb_error *error);
int fabric_release_step (struct fabric *f,
                         const char *fm_job_id,
                         const char *step_id,
                         fabric_done_f cb,
                         void *arg,
                         struct fmb_error *error);
int fabric_list (struct fabric *f,
                 fabric_done_f cb,
                 void *arg,
                 struct fmb_error *error);
int fabric_login (struct fabric *f,
                  fabric_done_f cb,
                  void *arg,
                  struct fmb_error *error);

int fabric_pollfds (struct fabric *f, struct pollfd *fds, int max);
int fabric_timeout_ms (struct fabric *f);
void fabric_process (struct fabric *f, const struct pollfd *fds, int n);
/* While holding, releases wait for fabric_start_held.  Reads leave at
 * once, and so does a reservation's create, which only follows its GET's
 * answer (a later pass).  Their callbacks run in a later fabric_process. */
void fabric_hold (struct fabric *f, bool on);
void fabric_start_held (struct fabric *f);
/* Their intent did not commit: each completes with FABRIC_NOT_SENT. */
void fabric_drop_held (struct fabric *f);

#endif
