/* apiclient.c: see apiclient.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "apiclient.h"
#include "fileutil.h"

#define API_REPLY_MAX (16 * 1024 * 1024) /* a listing of 1000 jobs is ~1 MiB */

struct buf {
    char *p;
    size_t n;
};

static size_t collect (char *d, size_t s, size_t n, void *arg)
{
    struct buf *b = arg;
    if (b->n + s * n > API_REPLY_MAX)
        return 0;
    char *np = realloc (b->p, b->n + s * n + 1);
    if (!np)
        return 0;
    memcpy (np + b->n, d, s * n);
    b->p = np;
    b->n += s * n;
    b->p[b->n] = '\0';
    return s * n;
}

int api_target_init (struct api_target *t,
                     const struct fmb_config *cfg,
                     const char *socket,
                     struct fmb_error *error)
{
    memset (t, 0, sizeof (*t));
    if (socket || !cfg->broker_url[0]) {
        t->socket = socket ? socket : cfg->socket;
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    t->url = cfg->broker_url;
    t->ca_file = cfg->client_ca_file[0] ? cfg->client_ca_file : NULL;
    if (access (cfg->client_token_file, R_OK) < 0 && errno == EACCES) {
        snprintf (t->token_problem,
                  sizeof (t->token_problem),
                  "[api] client_token_file %.180s: this user may not read it",
                  cfg->client_token_file);
        return 0;
    }
    if (fmb_check_private_file (cfg->client_token_file, error) < 0 ||
        fmb_read_file (
            cfg->client_token_file, API_TOKEN_MAX + 1, true, &text, &len, error) < 0)
        return fmb_error_prefix (error, "[api] client_token_file");
    if (len == 0 || len > API_TOKEN_MAX || strpbrk (text, " \t\r\n")) {
        explicit_bzero (text, len);
        free (text);
        errno = EINVAL;
        return fmb_errorf (error,
                           "[api] client_token_file %s: expected one token of 1..%d "
                           "characters",
                           cfg->client_token_file,
                           API_TOKEN_MAX);
    }
    memcpy (t->token, text, len + 1);
    explicit_bzero (text, len);
    free (text);
    return 0;
}

void api_target_clear (struct api_target *t)
{
    explicit_bzero (t->token, sizeof (t->token));
}

int api_client_call (const struct api_target *t,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error)
{
    if (t->url && !t->token[0] && (!bearer || !*bearer)) {
        errno = EACCES;
        return fmb_errorf (error, "%s", t->token_problem);
    }
    CURL *e = curl_easy_init ();
    struct buf b = {0};
    struct curl_slist *h = curl_slist_append (NULL, "Content-Type: application/json");
    char url[2048], auth[API_TOKEN_MAX + 32];
    long code = 0;
    if (!e || !h) {
        curl_slist_free_all (h);
        curl_easy_cleanup (e);
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    if (!bearer || !*bearer)
        bearer = t->url ? t->token : NULL;
    if (bearer && *bearer) {
        snprintf (auth, sizeof (auth), "Authorization: Bearer %s", bearer);
        struct curl_slist *with_auth = curl_slist_append (h, auth);
        explicit_bzero (auth, sizeof (auth));
        if (!with_auth) { /* h is still whole: never send without the token */
            curl_slist_free_all (h);
            curl_easy_cleanup (e);
            errno = ENOMEM;
            return fmb_errorf (error, "out of memory");
        }
        h = with_auth;
    }
    if (t->url) {
        snprintf (url, sizeof (url), "%s%s", t->url, path);
        /* TLS verification stays on: only the CA is ours to choose */
        if (t->ca_file)
            curl_easy_setopt (e, CURLOPT_CAINFO, t->ca_file);
        curl_easy_setopt (e, CURLOPT_PROTOCOLS_STR, "https");
    } else {
        snprintf (url, sizeof (url), "http://fmbroker%s", path);
        curl_easy_setopt (e, CURLOPT_UNIX_SOCKET_PATH, t->socket);
    }
    curl_easy_setopt (e, CURLOPT_URL, url);
    curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt (e, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt (e, CURLOPT_WRITEDATA, &b);
    if (body)
        curl_easy_setopt (e, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform (e);
    curl_easy_getinfo (e, CURLINFO_RESPONSE_CODE, &code);
    for (struct curl_slist *p = h; p; p = p->next) /* the token's copy */
        explicit_bzero (p->data, strlen (p->data));
    curl_slist_free_all (h);
    curl_easy_cleanup (e);
    if (cc != CURLE_OK) {
        free (b.p);
        errno = EHOSTUNREACH;
        return fmb_errorf (error,
                           "broker at %s: %s",
                           t->url ? t->url : t->socket,
                           curl_easy_strerror (cc));
    }
    ret->status = code;
    ret->body = b.p ? json_loads (b.p, 0, NULL) : NULL;
    free (b.p);
    return 0;
}
