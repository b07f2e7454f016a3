/* apitarget.c: where the broker is (apiclient.h): the configuration's
 * socket or TLS URLs and the client token.  Apart from the call
 * (apiclient.c), so that the Flux shell plugin, which reads the target
 * but never calls the broker, needs no OpenSSL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apiclient.h"
#include "fileutil.h"
#include "validate.h"

/* [api] client_token_file with "%n" replaced by this node's name
 * ($FMBROKER_NODE, which the Flux scripts set to the rank's Flux host
 * name, else $SLURMD_NODENAME, else the short host name), so that one
 * configuration serves several nodes emulated on one host (Slurm's
 * multiple-slurmd, tests); a real node has its own file anyway. */
static void token_path (const char *pattern, const char *given, char *out, size_t len)
{
    const char *pct = strstr (pattern, "%n");
    const char *node = given && *given ? given : getenv ("FMBROKER_NODE");
    char host[256] = "";
    if (!node || !*node)
        node = getenv ("SLURMD_NODENAME");
    if (!pct) {
        snprintf (out, len, "%s", pattern);
        return;
    }
    if (!node || !*node || !valid_node_name (node)) {
        gethostname (host, sizeof (host) - 1);
        host[strcspn (host, ".")] = '\0';
        node = host;
    }
    snprintf (out, len, "%.*s%s%s", (int)(pct - pattern), pattern, node, pct + 2);
}

void api_target_init (struct api_target *t,
                      const struct fmb_config *cfg,
                      const char *socket)
{
    api_target_init_node (t, cfg, socket, NULL);
}

void api_target_init_node (struct api_target *t,
                           const struct fmb_config *cfg,
                           const char *socket,
                           const char *node)
{
    memset (t, 0, sizeof (*t));
    if (socket || !cfg->broker_url[0]) {
        t->socket = socket ? socket : cfg->socket;
        return;
    }
    char *text = NULL;
    size_t len = 0;
    char path[FMB_CFG_PATH_MAX + 64];
    token_path (cfg->client_token_file, node, path, sizeof (path));
    t->url = cfg->broker_url;
    t->ca_file = cfg->client_ca_file[0] ? cfg->client_ca_file : NULL;
    if (access (path, R_OK) < 0 && errno == EACCES) {
        snprintf (t->token_problem,
                  sizeof (t->token_problem),
                  "[api] client_token_file %.180s: this user may not read it",
                  path);
        return;
    }
    /* A token that cannot be used fails each call, saying why, not the
     * program: an epilog still destroys the job's services and keeps its
     * report for later, a prolog fails the job with the reason. */
    struct fmb_error why;
    if (fmb_check_private_file (path, &why) < 0 ||
        fmb_read_file (path, API_TOKEN_MAX + 1, true, &text, &len, &why) < 0) {
        snprintf (t->token_problem,
                  sizeof (t->token_problem),
                  "[api] client_token_file: %.200s",
                  why.text);
        return;
    }
    if (len == 0 || len > API_TOKEN_MAX || strpbrk (text, " \t\r\n")) {
        explicit_bzero (text, len);
        free (text);
        snprintf (t->token_problem,
                  sizeof (t->token_problem),
                  "[api] client_token_file %.180s: expected one token of 1..%d "
                  "characters",
                  path,
                  API_TOKEN_MAX);
        return;
    }
    memcpy (t->token, text, len + 1);
    explicit_bzero (text, len);
    free (text);
}

int api_config_broker_url (struct fmb_config *cfg,
                           const char *urls,
                           struct fmb_error *error)
{
    char set[FMB_CFG_PATH_MAX + 32];
    if (strlen (urls) >= FMB_CFG_PATH_MAX) {
        errno = EINVAL;
        return fmb_errorf (error, "--broker-url: too long");
    }
    snprintf (set, sizeof (set), "api.broker_url=%s", urls);
    if (fmb_config_set (cfg, set, error) < 0)
        return fmb_error_prefix (error, "--broker-url");
    return 0;
}

void api_target_clear (struct api_target *t)
{
    explicit_bzero (t->token, sizeof (t->token));
}

unsigned api_target_url_count (const struct api_target *t)
{
    if (!t->url || !t->url[0])
        return 0;
    unsigned n = 1;
    for (const char *p = t->url; *p; p++)
        n += *p == ',';
    return n;
}

int api_target_url (const struct api_target *t, unsigned i, char *out, size_t len)
{
    const char *p = t->url;
    for (unsigned k = 0; p && k < i; k++) {
        p = strchr (p, ',');
        if (p)
            p++;
    }
    if (!p || !len) {
        errno = ENOENT;
        return -1;
    }
    size_t n = strcspn (p, ",");
    if (n >= len)
        n = len - 1;
    memcpy (out, p, n);
    out[n] = '\0';
    return 0;
}
