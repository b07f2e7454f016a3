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

int broker_http_call (const struct api_target *t,
                      long timeout_s,
                      const char *method,
                      const char *path,
                      const char *body,
                      struct api_reply *ret,
                      struct fmb_error *error);

#endif
