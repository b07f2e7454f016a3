/* metrics.h: what /metrics and /v1/status say.  The counters live in
 * struct metrics (broker.h), counted by their owners; this prints them
 * with the store's gauges. */
#ifndef FMB_METRICS_H
#define FMB_METRICS_H

#include <stdint.h>

#include <jansson.h>

#include "fmclient.h"

struct broker;

/* The FM client's observer: every FM call, counted by call and result. */
void broker_observe_fm (const struct fmc_result *res, void *arg);
/* The loop spent 'us' in one turn, 'commit_us' of it committing: the
 * stall metrics. */
void broker_note_stall (struct broker *b, int64_t us, int64_t commit_us);
/* Prometheus text (malloc'ed), or NULL. */
char *broker_metrics_text (struct broker *b);
json_t *broker_status (struct broker *b);

#endif
