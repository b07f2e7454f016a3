/* retention.h: the jobs' background upkeep (retention.c): quarantine
 * expiry (every second) and the retention of released jobs and events
 * ([broker] retain_days), each a timer of the broker's. */
#ifndef FMB_RETENTION_H
#define FMB_RETENTION_H

struct broker;
struct retention;

/* Its timers start at once: quarantine expiry now, retention a little
 * after start (reconciliation first). */
struct retention *retention_create (struct broker *b);
void retention_destroy (struct retention *rt);

#endif
