/* brokerfix.h: a broker built as fmbrokerd builds it (store in a
 * temporary directory, the real contexts and routes), optionally with a
 * mock FM, driven pass by pass from a unit test. */
#ifndef FMB_BROKERFIX_H
#define FMB_BROKERFIX_H

#include <stdbool.h>

#include <jansson.h>

#include "broker.h"
#include "mockfm_util.h"

struct fix {
    char *dir; /* the state directory (kept across fix_close/fix_open) */
    bool with_fm;
    struct mockfm fm;
    struct broker b;
};

/* A fresh directory; 'with_fm': a mock FM on loopback and the broker
 * configured with it, else VNI-only. */
void fix_setup (struct fix *f, bool with_fm);
/* The broker on the state in f->dir (fix_setup calls it). */
void fix_open (struct fix *f);
/* The broker gone (as at shutdown), its state kept. */
void fix_close (struct fix *f);
/* Everything gone: broker, mock FM, directory. */
void fix_teardown (struct fix *f);

/* One loop pass, waiting at most 'max_ms' for input. */
void fix_pass (struct fix *f, int max_ms);
/* Passes until cond(f) holds or 'ms' pass; whether it held. */
bool fix_until (struct fix *f, bool (*cond) (struct fix *f), int ms);
/* A request on the broker's socket as a local user (this process's);
 * the answer's status, its body in *reply (NULL: dropped). */
int fix_request (struct fix *f,
                 const char *method,
                 const char *path,
                 const char *body,
                 json_t **reply);

/* The job's state and hwcoll state in the store (-1: no such job). */
int fix_job_state (struct fix *f, const char *job, int *hwcoll);

#endif
