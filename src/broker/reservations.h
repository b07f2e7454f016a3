/* reservations.h: the FM reservations in flight (a RUN's POST, or GET
 * then POST), the RUNs that wait for them, and those a restart
 * interrupted. */
#ifndef FMB_RESERVATIONS_H
#define FMB_RESERVATIONS_H

#include <stdbool.h>

#include "error.h"
#include "fmclient.h"

struct fmb_config;
struct fmsession;
struct http_req;
struct pass;
struct store;
struct http_problem;
struct reservations;

/* What the jobs do with a reservation (jobs.c registers them, with the
 * 'arg' each is given). */
struct reservations_ops {
    /* Record the outcome 'res' of job 'job''s reservation, inside the
     * pass's transaction (a job state transition). */
    int (*record) (void *arg,
                   const char *job,
                   const struct fmc_result *res,
                   struct fmb_error *e);
    /* Answer a RUN that waited, with the job as stored now (the
     * reservation already ended: a job still 'reserving' had its outcome
     * lost, and is not an answer to give). */
    int (*reply) (void *arg,
                  struct http_req *req,
                  const char *job,
                  int status,
                  struct http_problem *p);
};

/* The handles it uses, borrowed for its life ('fmc' NULL: VNI-only). */
struct reservations *reservations_create (const struct fmb_config *cfg,
                                          struct store *st,
                                          struct fmc *fmc,
                                          struct pass *pass,
                                          struct fmsession *fms);
/* Frees what reservations_shutdown left, once no FM callback can come. */
void reservations_destroy (struct reservations *rs);
void reservations_set_ops (struct reservations *rs,
                           const struct reservations_ops *ops,
                           void *arg);
/* Called when a reservation whose job was never committed was made at
 * the FM anyway: an orphan, unless the RM ran the job again meanwhile. */
void reservations_on_orphan (struct reservations *rs,
                             void (*fn) (void *arg),
                             void *arg);

/* Start job 'job''s reservation (its intent is in the store) with 'req'
 * waiting for it (201 if 'created', else 200); false if it completed at
 * once (as unavailable).  'created': this RUN wrote the job's first
 * intent, in the pass now open, so normally nothing of it is at the FM:
 * the POST goes first (and a refused one is followed by a GET).  Else (a
 * job left 'reserving' because its outcome could not be recorded) the
 * GET first finds what the FM made. */
bool reservations_start (struct reservations *rs,
                         const char *job,
                         struct http_req *req,
                         bool created);
/* A RUN repeated while the job's reservation runs waits for it too (200);
 * false if none runs. */
bool reservations_wait (struct reservations *rs, const char *job, struct http_req *req);
/* Does a reserve call for this job run right now? */
bool reservations_busy (struct reservations *rs, const char *job);
/* Any reserve call still out (or abandoned, its answer not back yet)? */
bool reservations_pending (const struct reservations *rs);
/* Resolve reservations left 'reserving' by a crash (at start). */
void reservations_recover (struct reservations *rs);
/* Shutdown: the calls are abandoned, their RUNs answered 503. */
void reservations_shutdown (struct reservations *rs);

#endif
