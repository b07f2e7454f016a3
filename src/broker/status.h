/* status.h: what /metrics and /v1/status say: the counters of metrics.h
 * printed with the store's gauges and the FM session's state. */
#ifndef FMB_STATUS_H
#define FMB_STATUS_H

#include <jansson.h>

struct broker;

/* Prometheus text (malloc'ed), or NULL. */
char *broker_metrics_text (struct broker *b);
json_t *broker_status (struct broker *b);

#endif
