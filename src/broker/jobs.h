/* jobs.h: the jobs, by concern: RUN (jobs_run.h), CLEANUP, steps and
 * node reports (jobs_cleanup.h), the views (jobs_view.h), retention and
 * quarantine (retention.h); and their wiring to the FM work (jobs.c). */
#ifndef FMB_JOBS_H
#define FMB_JOBS_H

#include "jobs_cleanup.h"
#include "jobs_run.h"
#include "jobs_view.h"
#include "retention.h"

struct broker;

/* The hooks by which the outbox and reconciliation report what they
 * observe (a reservation's delete finished, a reservation lost), and
 * the reservations record and answer; before reservations_recover. */
void jobs_start (struct broker *b);

#endif
