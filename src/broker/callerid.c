/* callerid.c: who a caller is (callerid.h): SO_PEERCRED on the Unix
 * socket; on TCP a node token, a static token of [api] tokens_file, or a
 * node's client certificate. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <openssl/crypto.h>

#include "monotime.h"
#include "callerid.h"
#include "fileutil.h"
#include "httpconn.h"
#include "log.h"
#include "netaddr.h"
#include "nodeauth.h"
#include "roles.h"

#define TOKENS_FILE_MAX   (64 * 1024)
#define MAX_STATIC_TOKENS 64

struct static_token {
    unsigned roles;
    char value[256];
};

struct callerid {
    const struct fmb_config *cfg; /* the running one: reload changes it */
    struct roles *roles;
    struct static_token tokens[MAX_STATIC_TOKENS];
    int ntokens;
    struct nodeauth *nodes; /* the node keys */
};

struct callerid *callerid_create (const struct fmb_config *cfg, struct roles *roles)
{
    struct callerid *id = calloc (1, sizeof (*id));
    if (id) {
        id->cfg = cfg;
        id->roles = roles;
    }
    return id;
}

void callerid_destroy (struct callerid *id)
{
    if (id) {
        nodeauth_destroy (id->nodes);
        explicit_bzero (id->tokens, sizeof (id->tokens));
        free (id);
    }
}

/* A TCP caller's credential: a node token, or a static token. */
static void identify_tcp (struct callerid *id, struct http_req *req)
{
    struct caller *c = &req->caller;
    struct http_conn *hc = conn_of (req->conn);
    if (hc)
        snprintf (c->addr, sizeof (c->addr), "%s", hc->addr);
    if (!c->bearer[0])
        return;
    char node[NODE_NAME_MAX + 1];
    enum nodeauth_result r = nodeauth_verify (
        id->nodes, c->bearer, id->cfg->revoked_nodes, fmb_realtime_ms (), node);
    if (r == NODEAUTH_OK || r == NODEAUTH_OK_PREVIOUS) {
        c->roles |= ROLE_AGENT;
        snprintf (c->node, sizeof (c->node), "%s", node);
        if (r == NODEAUTH_OK_PREVIOUS && httpreq_refusal_log_due (req))
            fmb_log (LOG_NOTICE,
                     "api: node %s (%s) uses a token of the previous node key; give "
                     "it its new token (fmbrokerd --node-token %s)",
                     node,
                     c->addr,
                     node);
        return;
    }
    if (r == NODEAUTH_REVOKED) {
        if (httpreq_refusal_log_due (req))
            fmb_log (LOG_WARNING,
                     "api: refused node %s (%s): revoked ([api] revoked_nodes)",
                     node,
                     c->addr);
        return;
    }
    if (r != NODEAUTH_NOT_NODE)
        return;
    /* static tokens, compared in constant time */
    size_t blen = strlen (c->bearer);
    for (int i = 0; i < id->ntokens && blen; i++) {
        size_t tlen = strlen (id->tokens[i].value);
        if (tlen == blen && CRYPTO_memcmp (id->tokens[i].value, c->bearer, blen) == 0)
            c->roles |= id->tokens[i].roles;
    }
}

/* A node's client certificate, as the TLS front's handshake found it
 * (verified against [api] tls_client_ca, meant for TLS clients): its CN
 * or first DNS name names the node.  0: none offered; 1: a node named;
 * -1: bad (*why says how). */
static int identify_cert (struct http_req *req,
                          char *node,
                          size_t len,
                          const char **why)
{
    struct http_conn *hc = conn_of (req->conn);
    if (!hc || hc->tls.cert == TLS_PEER_CERT_NONE)
        return 0;
    if (hc->tls.cert == TLS_PEER_CERT_BAD) {
        *why = hc->tls.why;
        return -1;
    }
    snprintf (node, len, "%s", hc->tls.node);
    return 1;
}

/* With [api] tls_client_cert: a verified certificate names the node (a
 * node token then must name the same one); 'required' leaves a caller
 * without one no credential at all, whatever token it sends. */
static void identify_by_cert (struct callerid *id, struct http_req *req)
{
    struct caller *c = &req->caller;
    char node[NODE_NAME_MAX + 1] = "";
    const char *why = NULL;
    int crt = identify_cert (req, node, sizeof (node), &why);
    if (crt == 1 && fmb_config_list_has (id->cfg->revoked_nodes, node))
        why = "its certificate names a revoked node";
    else if (crt < 0)
        ; /* why: the handshake's finding */
    else if (crt == 0 && id->cfg->tls_client_cert == FMB_CLIENT_CERT_REQUIRED)
        why = "no client certificate ([api] tls_client_cert = required)";
    else if (crt == 1 && c->node[0] && strcmp (c->node, node) != 0)
        why = "its node token names another node than its certificate";
    if (why) {
        if (httpreq_refusal_log_due (req))
            fmb_log (LOG_WARNING, "api: refused %s: %s", c->addr, why);
        c->roles = 0;
        c->node[0] = '\0';
        if (c->bearer[0]) { /* still "a credential" (401), but none that works */
            explicit_bzero (c->bearer, sizeof (c->bearer));
            c->bearer[0] = '-';
        }
        return;
    }
    if (crt == 1 && !c->roles) {
        c->roles |= ROLE_AGENT;
        snprintf (c->node, sizeof (c->node), "%s", node);
    }
}

void callerid_identify (struct callerid *id, struct http_req *req)
{
    struct caller *c = &req->caller;
    memset (c, 0, sizeof (*c));
    const char *auth =
        MHD_lookup_connection_value (req->conn, MHD_HEADER_KIND, "Authorization");
    if (auth && strncasecmp (auth, "Bearer ", 7) == 0)
        snprintf (c->bearer, sizeof (c->bearer), "%s", auth + 7);
    if (!req->tcp) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info (req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof (cred);
        if (ci &&
            getsockopt (ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
            c->local = true;
            c->uid = cred.uid;
            c->gid = cred.gid;
            c->roles = roles_of (id->roles, cred.uid, cred.gid) | ROLE_USER;
        }
        return;
    }
    identify_tcp (id, req);
    if (id->cfg->tls_client_cert != FMB_CLIENT_CERT_NONE)
        identify_by_cert (id, req);
}

/* Parse the tokens file into 'tokens' (MAX_STATIC_TOKENS); *n gets the
 * count.  An "agent" line (one token every node shares) only with
 * [api] shared_agent_token = true. */
static int load_tokens_into (const char *path,
                             bool shared_agent,
                             struct static_token *tokens,
                             int *n,
                             struct fmb_error *error)
{
    char *text;
    *n = 0;
    if (fmb_check_private_file (path, error) < 0 ||
        fmb_read_file (path, TOKENS_FILE_MAX, false, &text, NULL, error) < 0)
        return fmb_error_prefix (error, "[api] tokens_file");
    char *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r (text, "\n", &save); line;
         line = strtok_r (NULL, "\n", &save)) {
        lineno++;
        char role[16], value[256];
        if (line[0] == '#' || line[strspn (line, " \t")] == '\0')
            continue;
        if (sscanf (line, "%15s %255s", role, value) != 2 || strlen (value) < 16 ||
            *n == MAX_STATIC_TOKENS ||
            (strcmp (role, "rm") && strcmp (role, "admin") && strcmp (role, "agent"))) {
            explicit_bzero (text, strlen (text));
            free (text);
            errno = EINVAL;
            return fmb_errorf (
                error,
                "[api] tokens_file %s:%d: expected 'rm|admin|agent TOKEN' with a "
                "token of at least 16 characters",
                path,
                lineno);
        }
        if (strcmp (role, "agent") == 0 && !shared_agent) {
            explicit_bzero (text, strlen (text));
            free (text);
            errno = EPERM;
            return fmb_errorf (
                error,
                "[api] tokens_file %s:%d: an 'agent' token is one secret every "
                "compute node shares, and lets each act for all; give each node "
                "its own token (fmbrokerd --node-token NAME), or set [api] "
                "shared_agent_token = true to keep it",
                path,
                lineno);
        }
        tokens[*n].roles = role[0] == 'r'   ? ROLE_RM
                           : role[1] == 'd' ? ROLE_ADMIN
                                            : ROLE_AGENT;
        snprintf (tokens[(*n)++].value, sizeof (tokens[0].value), "%s", value);
        explicit_bzero (value, sizeof (value));
    }
    explicit_bzero (text, strlen (text));
    free (text);
    return 0;
}

int callerid_load (struct callerid *id,
                   const struct fmb_config *cfg,
                   struct fmb_error *error)
{
    if (load_tokens_into (cfg->tokens_file,
                          cfg->shared_agent_token,
                          id->tokens,
                          &id->ntokens,
                          error) < 0)
        return -1;
    return nodeauth_open (cfg, true, &id->nodes, error);
}

int callerid_reload (struct callerid *id,
                     const struct fmb_config *cfg,
                     struct fmb_error *error)
{
    struct static_token *tokens = calloc (MAX_STATIC_TOKENS, sizeof (*tokens));
    struct nodeauth *nodes = NULL;
    int n = 0;
    if (!tokens)
        return fmb_errorf (error, "out of memory");
    int rc =
        load_tokens_into (cfg->tokens_file, cfg->shared_agent_token, tokens, &n, error);
    if (rc == 0)
        rc = nodeauth_open (cfg, false, &nodes, error);
    if (rc == 0) {
        nodeauth_destroy (id->nodes);
        id->nodes = nodes;
        explicit_bzero (id->tokens, sizeof (id->tokens));
        memcpy (id->tokens, tokens, sizeof (*tokens) * (size_t)n);
        id->ntokens = n;
    }
    explicit_bzero (tokens, sizeof (*tokens) * MAX_STATIC_TOKENS);
    free (tokens);
    return rc;
}

/* One file the TCP listener reads at start: readable (and private when
 * 'secret'); 0, or 1 after reporting. */
static int check_tls_file (
    const char *key, const char *path, bool secret, svccheck_report_f report, void *arg)
{
    struct fmb_error error;
    char *text = NULL;
    int rc = 0;
    if ((secret && fmb_check_private_file (path, &error) < 0) ||
        fmb_read_file (path, 1024 * 1024, false, &text, NULL, &error) < 0) {
        fmb_error_prefix (&error, "%s", key);
        report (error.text, arg);
        rc = 1;
    }
    if (text)
        explicit_bzero (text, strlen (text));
    free (text);
    return rc;
}

/* What the TCP listener reads beyond tokens and its certificate: the
 * node key (made at the first start if missing), the client CA, the TLS
 * priority string (GnuTLS's own parser says what is wrong in it).  The
 * number of problems reported. */
static int check_node_files (const struct fmb_config *cfg,
                             svccheck_report_f report,
                             void *arg)
{
    struct fmb_error error;
    char path[FMB_CFG_PATH_MAX + 16];
    struct nodeauth *na = NULL;
    int n = 0;
    nodeauth_key_path (cfg, path, sizeof (path));
    if (access (path, F_OK) == 0 && nodeauth_open (cfg, false, &na, &error) < 0) {
        report (error.text, arg);
        n++;
    }
    nodeauth_destroy (na);
    if (cfg->tls_client_ca[0])
        n += check_tls_file (
            "[api] tls_client_ca", cfg->tls_client_ca, false, report, arg);
    gnutls_priority_t prio;
    const char *at = NULL;
    int r = gnutls_priority_init (&prio, cfg->tls_priorities, &at);
    if (r < 0) {
        fmb_errorf (&error,
                    "[api] tls_priorities: %s at '%.40s'",
                    gnutls_strerror (r),
                    at ? at : "");
        report (error.text, arg);
        n++;
    } else
        gnutls_priority_deinit (prio);
    if (cfg->shared_agent_token)
        fmb_log (LOG_WARNING,
                 "[api] shared_agent_token = true: every compute node holds the same "
                 "token and may act for every node and read every job's session "
                 "token; give nodes their own (fmbrokerd --node-token NAME)");
    return n;
}

int callerid_check_files (const struct fmb_config *cfg,
                          svccheck_report_f report,
                          void *arg)
{
    struct fmb_error error;
    if (!cfg->tcp[0])
        return 0;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int n = 0;
    if (fmb_parse_hostport (cfg->tcp, &ss, &sslen) < 0) {
        fmb_errorf (&error, "[api] tcp = %s: not an address", cfg->tcp);
        report (error.text, arg);
        n++;
    }
    struct static_token *tokens = calloc (MAX_STATIC_TOKENS, sizeof (*tokens));
    int count = 0;
    if (!tokens) {
        report ("out of memory", arg);
        return n + 1;
    }
    if (load_tokens_into (
            cfg->tokens_file, cfg->shared_agent_token, tokens, &count, &error) < 0) {
        report (error.text, arg);
        n++;
    }
    explicit_bzero (tokens, sizeof (*tokens) * MAX_STATIC_TOKENS);
    free (tokens);
    n += check_tls_file ("[api] tls_cert", cfg->tls_cert, false, report, arg);
    n += check_tls_file ("[api] tls_key", cfg->tls_key, true, report, arg);
    return n + check_node_files (cfg, report, arg);
}
