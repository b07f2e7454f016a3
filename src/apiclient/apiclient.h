/* apiclient.h: one call to fmbrokerd's REST API, over its Unix socket or,
 * from hosts without it (compute nodes), over its TLS listener with a
 * bearer token; for every program and plugin that talks to it (fmbroker,
 * fmbroker-cxi, the SPANK step-end module, the Flux jobtap plugin).
 *
 * HTTP/1.1 over OpenSSL alone, not libcurl: these run on job launch and
 * job end (EpilogSlurmctld's CLEANUP, the node agent), and libcurl brings
 * some 28 shared objects (gnutls, Kerberos, LDAP, SSH, RTMP...) whose
 * loading cost every run 30-50 ms on a loaded 2-core node; a CLEANUP
 * call took 2.5-4 times the CPU with it (bench/RESULTS.md §19).  One
 * small request at a time, to one broker: that is all this does.  (The
 * broker's calls to the FM, many at once, are libcurl's: src/fmclient.)
 * The connection, the TLS handshake and the exchange are each bounded as
 * a whole, however slowly a peer trickles its bytes.  Known limit: the
 * name lookup (getaddrinfo) has no timeout of its own (give broker_url by
 * address where the resolver may be slow; the CLI's hook commands bound
 * their whole run with alarm(2): src/cli). */
#ifndef FMB_APICLIENT_H
#define FMB_APICLIENT_H

#include <jansson.h>

#include "config.h"
#include "error.h"

#define API_TOKEN_MAX 255

/* Where the broker is. */
struct api_target {
    const char *socket; /* the Unix socket, unless url is set */
    /* https://HOST:PORT, or an ordered comma-separated list of them (an
     * active broker and its standbys; config.c normalised it), or NULL */
    const char *url;
    const char *ca_file; /* verifies the broker's certificate; NULL: system CAs */
    char token[API_TOKEN_MAX + 1]; /* for url: [api] client_token_file */
    /* Why there is no token: a user who may not read the file can still
     * call with a bearer of their own (a job's session token); other
     * calls fail with it. */
    char token_problem[FMB_ERROR_TEXT_MAX];
};

/* From the configuration: 'socket' if not NULL (a command-line override),
 * else [api] broker_url with the token of [api] client_token_file (which
 * must be private to its owner and hold one token; one this user may not
 * read, or that is not so, is not an error until a call needs it: the
 * call fails, saying why), else [api] socket. */
void api_target_init (struct api_target *t,
                      const struct fmb_config *cfg,
                      const char *socket);
/* The same for 'node' (NULL: as above, from the environment): its token
 * where client_token_file says %n (several nodes emulated on one host).
 * The node service, whose threads serve several jobs at once, names the
 * node here rather than in its environment. */
void api_target_init_node (struct api_target *t,
                           const struct fmb_config *cfg,
                           const char *socket,
                           const char *node);
/* A --broker-url option: 'urls' (one https URL or an ordered comma list)
 * replaces [api] broker_url in 'cfg', checked as the configuration is. */
int api_config_broker_url (struct fmb_config *cfg,
                           const char *urls,
                           struct fmb_error *error);
/* Wipe the token. */
void api_target_clear (struct api_target *t);

struct api_reply {
    long status;  /* the HTTP status */
    json_t *body; /* the JSON answer (owned), a JSON string holding an
                   * answer that is not JSON (/metrics), or NULL */
};

/* One connection kept open from call to call (the node service,
 * fmbroker-cxi serve): no TLS set-up or handshake per job.  A broker
 * found away only after a wait (no answer within a second or more, not
 * a refusal) is taken as away for 2 s after, saying so: the service's
 * callers in line behind that wait are not each made to wait 5 s more.
 * A kept connection that fails before its answer is replaced and the
 * request sent again: every call made on one is a GET, or a PUT or
 * DELETE the broker takes as the same when it comes twice (a RUN, a
 * report, a step's end). */
struct api_keep;
struct api_keep *api_keep_create (void);
void api_keep_destroy (struct api_keep *k);
/* Is a connection kept, and not closed by the broker (one that was is
 * let go here)?  The kept TLS session is resumed by the next one. */
bool api_keep_is_open (struct api_keep *k);
/* The broker found away is to be tried again now (a caller's own retry,
 * not the next caller in line). */
void api_keep_clear_away (struct api_keep *k);
/* Its descriptor, for poll() (readable: the broker closed it); -1. */
int api_keep_fd (const struct api_keep *k);

/* 0 when the broker answered (any status: the caller judges it); -1 with
 * EHOSTUNREACH and a message naming the socket or URL when it could not
 * be reached.  With a list of URLs, the brokers are tried in order within
 * the one timeout: the next after a failure to connect (or a connection
 * that died before the answer), each with an equal share of the time left
 * to connect; the message names every one tried.  TLS 1.2 or later, the
 * broker's certificate verified against the target's CA file (else the
 * system's) and its host name or address.  'keep' (may be NULL: a
 * connection per call, closed after it) is the connection kept from the
 * last call.  'bearer' (may be NULL) is sent as Authorization: Bearer, in
 * place of the target's token.  Safe on any thread; a broker that closes
 * the connection mid-request is an error, never a SIGPIPE. */
int api_client_call (const struct api_target *t,
                     struct api_keep *keep,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error);

/* 'in' percent-encoded as one path segment (all but A-Z a-z 0-9 - . _ ~)
 * into out; -1 with ENAMETOOLONG when it does not fit in len. */
int api_path_escape (const char *in, char *out, size_t len);

/* How many URLs the target's list holds (0 for the socket), and the i-th. */
unsigned api_target_url_count (const struct api_target *t);
int api_target_url (const struct api_target *t, unsigned i, char *out, size_t len);

#endif
