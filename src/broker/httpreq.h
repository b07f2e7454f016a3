/* httpreq.h: what a handler sees of a request: who called (struct
 * caller, checked by the dispatcher before the handler runs), the decoded
 * path parameters, query and body, and the ways to answer: reply now,
 * suspend and reply later, or return -1 with a struct http_problem that
 * the dispatcher turns into an RFC 9457 problem document.
 */
#ifndef FMB_HTTPREQ_H
#define FMB_HTTPREQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "validate.h"

#define API_MAX_BODY \
    (1024 * 1024) /* 16k nodes x ~40 B per name ~ 640 KiB, rounded up */

struct http_req;
struct waiter;

/* Who may call a route (any of the bits). */
enum {
    ROLE_RM = 1,    /* resource manager: [api] rm_users, or an rm token on TCP */
    ROLE_ADMIN = 2, /* [api] admin_users / admin_groups, or an admin token */
    ROLE_JOB = 4,   /* holder of the session token of the job in the path */
    ROLE_USER = 8,  /* any local user (the handler narrows it to their jobs) */
    ROLE_ANY = 16,  /* anyone, even without credentials */
    /* node agent on another host (TCP): reads jobs, reports nodes and
     * cleans steps (a node's step-end hook), nothing else.  With a node
     * token (caller.node set) only for itself and the jobs that include
     * it; with the shared agent token ([api] shared_agent_token) for all. */
    ROLE_AGENT = 32,
};

struct caller {
    bool local; /* Unix socket: uid/gid are the peer's */
    uid_t uid;
    gid_t gid;
    unsigned roles;    /* ROLE_RM | ROLE_ADMIN | ROLE_USER held by identity */
    bool job_token_ok; /* the bearer token is the path job's session token */
    char bearer[256];  /* Authorization: Bearer value, or "" */
    /* ROLE_AGENT by a node's own token or certificate: its name ("" for
     * the shared agent token) */
    char node[NODE_NAME_MAX + 1];
    char addr[64]; /* TCP: the client's address; "" on the socket */
};

/* Who the caller is, for a log line: "node n1 (10.0.0.1)", "uid 1000",
 * "an rm token (10.0.0.2)", ... */
void http_caller_name (const struct caller *c, char *out, size_t len);
/* Log a refusal (403) with the caller's identity, untrusted text escaped;
 * at most a few lines per 10 s in all, then a count. */
void http_log_refusal (struct http_req *req, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Why a handler failed: the status and detail of the RFC 9457 problem
 * document the dispatcher answers with (http_reply_failure). */
#define HTTP_DETAIL_MAX 512
struct http_problem {
    int status;
    char detail[HTTP_DETAIL_MAX];
};

const struct caller *http_caller (struct http_req *req);
/* Decoded path parameters ("" if the route has none of that name). */
const char *http_job (struct http_req *req);
const char *http_step (struct http_req *req, size_t *len);
const char *http_node (struct http_req *req);
/* A query argument, percent-decoded, or NULL. */
const char *http_query (struct http_req *req, const char *name);
/* A flag in the query: 1 or true, 0 or false (absent: false); -1 with
 * EINVAL for any other value. */
int http_query_bool (struct http_req *req, const char *name, bool *value);
/* A number in the query: 0 when absent (*value untouched), 1 when it is
 * decimal digits only and within [min, max], -1 with EINVAL otherwise. */
int http_query_number (struct http_req *req,
                       const char *name,
                       uint64_t min,
                       uint64_t max,
                       uint64_t *value);
/* The decoded JSON body (borrowed), for routes with body = true. */
json_t *http_body (struct http_req *req);
/* The body as it came, *len its length (NULL: none). */
const char *http_body_text (struct http_req *req, size_t *len);

/* Reply with a JSON document (stolen). */
void http_reply (struct http_req *req, int status, json_t *body);
/* Reply with text (stolen) of a given content type. */
void http_reply_text (struct http_req *req, int status, const char *ctype, char *text);
/* Reply with an RFC 9457 problem document. */
void http_reply_problem (struct http_req *req, int status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/* Fill 'p' for a handler's failure; returns -1.  http_problem_errno takes
 * the status from errno (http_status_of_errno) and keeps errno. */
int http_problemf (struct http_problem *p, int status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
int http_problem_errno (struct http_problem *p, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
/* Reply with the problem document of a failure 'p' describes. */
void http_reply_failure (struct http_req *req, const struct http_problem *p);
/* 503: the loop pass that held this request's change did not commit,
 * because of 'why' (the store's reason, e.g. "database or disk is full";
 * NULL: not known). */
void http_reply_uncommitted (struct http_req *req, const char *why);
/* errno -> status (ENOENT 404, EEXIST 409, EINVAL 400, EAGAIN 503, ...). */
int http_status_of_errno (int errnum);
/* Answer later: the handler returns; a later http_reply resumes it. */
void http_suspend (struct http_req *req);
/* This answer claims no change: send it without waiting for the pass's
 * commit (call before replying). */
void http_no_hold (struct http_req *req);
/* Add "Retry-After: SECONDS" to the answer (429, 503). */
void http_retry_after (struct http_req *req, unsigned seconds);

/* The request's link for the wait queues (waitq.h). */
struct waiter *http_wait (struct http_req *req);

#endif
