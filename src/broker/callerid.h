/* callerid.h: who a caller is.  On the Unix socket SO_PEERCRED's uid and
 * gid, with the roles roles.c gives them; on TCP a node token (nodeauth),
 * a static token of [api] tokens_file, or (with [api] tls_client_cert) a
 * node's client certificate.  It fills the request's struct caller; what
 * the caller may do is the dispatcher's question.
 */
#ifndef FMB_CALLERID_H
#define FMB_CALLERID_H

#include "config.h"
#include "error.h"
#include "svccheck.h"

struct callerid;
struct http_req;
struct roles;

/* 'cfg' is the running configuration (read at each request: reload
 * changes it in place). */
struct callerid *callerid_create (const struct fmb_config *cfg, struct roles *roles);
void callerid_destroy (struct callerid *id);
/* The TCP listener's credentials: the tokens file and the node keys
 * (made at the first start if missing). */
int callerid_load (struct callerid *id,
                   const struct fmb_config *cfg,
                   struct fmb_error *error);
/* Re-read [api] tokens_file and the node keys (reload); on failure the
 * old ones stay. */
int callerid_reload (struct callerid *id,
                     const struct fmb_config *cfg,
                     struct fmb_error *error);
/* Fill the caller of 'req' from its connection and Authorization. */
void callerid_identify (struct callerid *id, struct http_req *req);
/* What the TCP listener will need from its files (tokens file, TLS
 * certificate and private key, node key, client CA, TLS priorities),
 * checked without listening: --check-config and start share it.  Each
 * problem is reported; returns how many. */
int callerid_check_files (const struct fmb_config *cfg,
                          svccheck_report_f report,
                          void *arg);

#endif
