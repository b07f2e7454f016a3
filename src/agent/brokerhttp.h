/* brokerhttp.h: the node agent's calls to fmbrokerd, over OpenSSL alone.
 *
 * Why not libcurl (which the CLI uses): fmbroker-cxi runs in every job's
 * node prolog and epilog, on the launch path, and libcurl brings some 35
 * shared objects (gnutls, Kerberos, LDAP, SSH, RTMP...) whose loading
 * cost each run 30-50 ms on a loaded 2-core node (bench/RESULTS.md,
 * issue 36).  The agent needs one small HTTP/1.1 request at a time, to
 * the broker's Unix socket or its TLS listener: that is all this does.
 *
 * Same contract as api_client_call (apiclient.h): 0 when the broker
 * answered (any status), -1 with EHOSTUNREACH and a message naming the
 * socket or every URL tried when it could not be reached; a list of URLs
 * is tried in order within the one timeout, each with an equal share of
 * the time left to connect.  TLS 1.2 or later, the broker's certificate
 * verified against the target's CA file (else the system's) and its
 * host name or address. */
#ifndef FMB_AGENT_BROKERHTTP_H
#define FMB_AGENT_BROKERHTTP_H

#include "apiclient.h"

/* One connection kept open from call to call (the node service,
 * fmbroker-cxi serve): no TLS set-up or handshake per job.  A broker
 * found away only after a wait (no answer within a second or more, not
 * a refusal) is taken as away for 2 s after, saying so: the service's
 * callers in line behind that wait are not each made to wait 5 s more.
 * A kept connection that fails before its answer is replaced and the
 * request sent again: every call of the agent's is a GET, or a PUT or
 * DELETE the broker takes as the same when it comes twice (a RUN, a
 * report, a step's end).
 * NULL to broker_http_call: a connection per call, closed after it. */
struct broker_keep;
struct broker_keep *broker_keep_create (void);
void broker_keep_destroy (struct broker_keep *k);

int broker_http_call (const struct api_target *t,
                      struct broker_keep *keep,
                      long timeout_s,
                      const char *method,
                      const char *path,
                      const char *body,
                      struct api_reply *ret,
                      struct fmb_error *error);

#endif
