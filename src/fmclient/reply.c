/* reply.c: the FM dialect's answers: what each call's answer means.
 * The pure parsers (fmc_reply_job, fmc_reply_list: fuzzed), the listing
 * copied into one allocation (on the parser thread or inline), and the
 * classification of an answer into an fmc_status with its error text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmc_reply.h"
#include "fmc_request.h"

/* ---- answers ------------------------------------------------------- */

static void describe_http_error (
    struct fmc_req *r, long http, json_t *body, char *text, size_t len)
{
    const char *why = NULL;
    if (json_is_object (body)) {
        why = json_string_value (json_object_get (body, "detail"));
        if (!why)
            why = json_string_value (json_object_get (body, "message"));
    }
    snprintf (text,
              len,
              "FM answered %ld to %s %s%s%.120s",
              http,
              r->method,
              r->path,
              why ? ": " : "",
              why ? why : "");
}

/* The token goes into every task's environment and into shell code the
 * node agent prints: only characters that mean nothing to a shell or an
 * environment file, in a length a bearer header carries. */
bool fmc_token_is_safe (const char *token, size_t len)
{
    if (len < FMC_TOKEN_MIN || len > FMC_TOKEN_MAX || strlen (token) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = token[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || strchr ("._~+/=:-", c)))
            return false;
    }
    return true;
}

int fmc_reply_job (json_t *body, const char **token, long *mcast_limit)
{
    json_t *tok = json_object_get (body, "sessionToken");
    json_t *limit = json_object_get (body, "mcastLimit");
    if (!json_is_string (tok) || json_string_length (tok) == 0) {
        errno = EPROTO;
        return -1;
    }
    if (!fmc_token_is_safe (json_string_value (tok), json_string_length (tok))) {
        errno = EBADMSG;
        return -1;
    }
    *token = json_string_value (tok);
    *mcast_limit = json_is_integer (limit) ? (long)json_integer_value (limit) : -1;
    return 0;
}

int fmc_reply_list (json_t *body, const char ***ret_ids, size_t *ret_n)
{
    json_t *links = json_object_get (body, "documentLinks");
    size_t i, n = 0;
    json_t *v;
    if (!json_is_array (links)) {
        errno = EPROTO;
        return -1;
    }
    const char **ids = calloc (json_array_size (links) + 1, sizeof (*ids));
    if (!ids)
        return -1;
    /* Links are FM-relative paths "/fabric/collectives/jobs/{id}"; take
     * what follows the collection path wherever it is, so a gateway
     * prefix does not confuse us (Slurm blindly drops 25 characters). */
    json_array_foreach (links, i, v)
    {
        const char *s = json_string_value (v);
        const char *p = s ? strstr (s, FMC_JOBS_PATH "/") : NULL;
        if (!p)
            continue;
        p += strlen (FMC_JOBS_PATH "/");
        if (*p && !strchr (p, '/'))
            ids[n++] = p;
    }
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

static void job_answer (struct fmc_req *r,
                        long http,
                        json_t *body,
                        struct fmc_result *res)
{
    if (fmc_reply_job (body, &res->session_token, &res->mcast_limit) < 0) {
        char text[FMC_ERROR_MAX];
        /* never the token itself: it may be anything */
        snprintf (text,
                  sizeof (text),
                  "malformed FM answer to %s %s: %s",
                  r->method,
                  r->path,
                  errno == EBADMSG ? "unsafe sessionToken (not " FMC_TOKEN_RULE ")"
                                   : "no sessionToken");
        fmc_req_finish (r, FMC_PERMANENT, http, text, res);
        return;
    }
    fmc_req_finish (r, FMC_OK, http, NULL, res);
}

/* A listing's answer, into r->list_*: pure, so that it runs on the
 * parser thread as well as inline.  The ids are copied into one
 * allocation so that the JSON can be freed where it was parsed. */
void fmc_reply_list_parse (struct fmc_req *r, json_t *body)
{
    const char **ids;
    size_t n, len = 0;
    r->list_status = FMC_PERMANENT;
    if (!json_is_object (body)) {
        snprintf (r->list_error,
                  sizeof (r->list_error),
                  "malformed FM answer to %s %s: not a JSON object",
                  r->method,
                  r->path);
        return;
    }
    if (fmc_reply_list (body, &ids, &n) < 0) {
        bool proto = errno == EPROTO;
        snprintf (
            r->list_error,
            sizeof (r->list_error),
            "%s",
            proto ? "malformed FM job list: no documentLinks array" : "out of memory");
        r->list_status = proto ? FMC_PERMANENT : FMC_RETRYABLE;
        return;
    }
    for (size_t i = 0; i < n; i++)
        len += strlen (ids[i]) + 1;
    r->list_ids = malloc ((n + 1) * sizeof (*ids) + len);
    if (!r->list_ids) {
        free (ids);
        snprintf (r->list_error, sizeof (r->list_error), "out of memory");
        r->list_status = FMC_RETRYABLE;
        return;
    }
    char *p = (char *)(r->list_ids + n + 1);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen (ids[i]) + 1;
        r->list_ids[i] = memcpy (p, ids[i], l);
        p += l;
    }
    r->list_ids[n] = NULL;
    r->list_n = n;
    r->list_status = FMC_OK;
    free (ids);
}

/* On the loop: call back with what list_parse found. */
void fmc_reply_list_finish (struct fmc_req *r)
{
    struct fmc_result res = {.mcast_limit = -1};
    if (r->list_status != FMC_OK) {
        fmc_req_finish (r, r->list_status, r->list_http, r->list_error, &res);
        return;
    }
    res.job_ids = r->list_ids;
    res.njob_ids = r->list_n;
    res.req_ = r;
    fmc_req_finish (r, FMC_OK, r->list_http, NULL, &res);
}

const char **fmc_take_job_ids (const struct fmc_result *res)
{
    struct fmc_req *r = res->req_;
    if (!r || r->op != FMC_OP_LIST)
        return NULL;
    const char **ids = r->list_ids;
    r->list_ids = NULL;
    return ids;
}

/* An FM answer that is not an error: what the call wanted from it. */
static void answer_ok (struct fmc_req *r,
                       long http,
                       json_t *body,
                       struct fmc_result *res)
{
    char text[FMC_ERROR_MAX];
    if (r->op == FMC_OP_LIST) {
        r->list_http = http;
        fmc_reply_list_parse (r, body);
        fmc_reply_list_finish (r);
        return;
    }
    bool needs_json = r->op == FMC_OP_GET || r->op == FMC_OP_CREATE;
    if (needs_json && !json_is_object (body)) {
        snprintf (text,
                  sizeof (text),
                  "malformed FM answer to %s %s: not a JSON object",
                  r->method,
                  r->path);
        fmc_req_finish (r, FMC_PERMANENT, http, text, res);
    } else if (r->op == FMC_OP_GET || r->op == FMC_OP_CREATE)
        job_answer (r, http, body, res);
    else
        fmc_req_finish (r, FMC_OK, http, NULL, res);
}

/* An FM answer that is an error, classified. */
static void answer_error (struct fmc_req *r,
                          long http,
                          json_t *body,
                          struct fmc_result *res)
{
    char text[FMC_ERROR_MAX];
    enum fmc_status st;
    describe_http_error (r, http, body, text, sizeof (text));
    /* Paths every collectives API has: a 404 there is a wrong url. */
    res->no_api = http == 404 && (r->op == FMC_OP_LIST || r->op == FMC_OP_CREATE);
    if (res->no_api) {
        size_t n = strlen (text);
        snprintf (text + n,
                  sizeof (text) - n,
                  "; no collectives API at [fabric_manager] url %s (is its path "
                  "right?)",
                  r->fmc->cfg.url);
    }
    if (http == 404 &&
        (r->op == FMC_OP_GET || r->op == FMC_OP_PATCH || r->op == FMC_OP_DELETE))
        st = FMC_NOT_FOUND;
    else if (http == 401 || http == 403)
        st = FMC_UNAUTHORIZED;
    else if (http == 408 || http == 409 || http == 425 || http == 429 || http >= 500)
        st = FMC_RETRYABLE;
    else
        st = FMC_PERMANENT;
    fmc_req_finish (r, st, http, text, res);
}

void fmc_reply_answer (struct fmc_req *r,
                       long http,
                       json_t *body,
                       struct fmc_result *res)
{
    if (http >= 200 && http < 300)
        answer_ok (r, http, body, res);
    else if (http == 404 && r->op == FMC_OP_PROBE)
        fmc_req_finish (r, FMC_OK, http, NULL, res); /* the API answered: no such job */
    else
        answer_error (r, http, body, res);
}
