/* dispatch.h: the route table's shape, and the dispatcher that does what
 * every request needs before its handler: the route and its
 * percent-decoded, validated path parameters, the query's encoding, the
 * caller's identity (callerid.h) and the role check, the body cap and
 * strict JSON decoding, and problem+json for every error.  Handlers only
 * see a checked request (httpreq.h).
 */
#ifndef FMB_DISPATCH_H
#define FMB_DISPATCH_H

#include <stdbool.h>

struct broker;
struct callerid;
struct dispatch;
struct http_problem;
struct http_req;

/* A handler answers (http_reply*) or suspends the request and returns 0,
 * or returns -1 with 'p' filled (http_problemf), and the dispatcher
 * answers with the problem document.  'b' is what the route table's
 * owner handed to http_create (http_deps.route_arg). */
typedef int (*route_f) (struct broker *b, struct http_req *req, struct http_problem *p);

struct route {
    const char *method;
    const char *path; /* "/v1/jobs/{job}/steps/{step}" */
    unsigned who;     /* who may call it: ROLE_* (httpreq.h), any of the bits */
    bool body;        /* expects a JSON object body */
    route_f handler;
};

/* Is 'token' the session token of 'job'?  (A job's token is a credential
 * for that job.) */
typedef bool (*dispatch_token_f) (void *arg, const char *job, const char *token);

struct dispatch *dispatch_create (const struct route *routes,
                                  unsigned nroutes,
                                  struct broker *route_arg,
                                  struct callerid *ids,
                                  dispatch_token_f job_token_ok,
                                  void *job_token_arg);
void dispatch_destroy (struct dispatch *d);
/* The route, the query and the caller's right to call it, from the
 * headers alone, before any body is read; true when that answered the
 * request (a problem document), false when dispatch_request goes on. */
bool dispatch_headers (struct dispatch *d, struct http_req *req, const char *url);
/* Route, query, caller and body checks, then the handler; every failure
 * is answered here, as a problem document. */
void dispatch_request (struct dispatch *d, struct http_req *req, const char *url);

#endif
