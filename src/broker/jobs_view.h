/* jobs_view.h: the jobs as the API shows them (jobs_view.c): who may see
 * what, the job views, GET of a job or a node's part of it, listings,
 * the pool's VNIs. */
#ifndef FMB_JOBS_VIEW_H
#define FMB_JOBS_VIEW_H

#include <stdbool.h>

#include <jansson.h>

struct broker;
struct caller;
struct http_req;
struct http_problem;
struct store_job;

/* Route handlers (routes.c). */
int jobs_get (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_list (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_node_get (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_vni_list (struct broker *b, struct http_req *req, struct http_problem *p);

/* A compute node acting with its own credential (not also rm or admin). */
bool jobs_node_only (const struct caller *c);
/* Does the job include the calling node?  Callers that are not a node
 * pass; a job RUN with only node_count has no member. */
bool jobs_node_member (struct broker *b,
                       const struct caller *c,
                       const struct store_job *j);
/* 403 for a node acting beyond itself, logged with its identity; -1. */
int jobs_node_refused (struct http_req *req,
                       struct http_problem *p,
                       const char *fmt,
                       ...) __attribute__ ((format (printf, 3, 4)));
/* The job as the API shows it to caller 'c' (a new reference). */
json_t *jobs_view (struct broker *b, const struct store_job *j, const struct caller *c);
/* Reply with the job as it is in the store now ('status'); 503 in 'p'
 * (-1) for an active job still 'reserving' with no reservation running. */
int jobs_reply (struct broker *b,
                struct http_req *req,
                const char *id,
                int status,
                struct http_problem *p);

#endif
