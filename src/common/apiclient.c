/* apiclient.c: see apiclient.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "apiclient.h"

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

int api_client_call (const char *socket,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error)
{
    CURL *e = curl_easy_init ();
    struct buf b = {0};
    struct curl_slist *h = curl_slist_append (NULL, "Content-Type: application/json");
    char url[2048], auth[600];
    long code = 0;
    if (!e)
        return fmb_errorf (error, "out of memory");
    if (bearer && *bearer) {
        snprintf (auth, sizeof (auth), "Authorization: Bearer %s", bearer);
        h = curl_slist_append (h, auth);
        explicit_bzero (auth, sizeof (auth));
    }
    snprintf (url, sizeof (url), "http://fmbroker%s", path);
    curl_easy_setopt (e, CURLOPT_UNIX_SOCKET_PATH, socket);
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
    curl_slist_free_all (h);
    curl_easy_cleanup (e);
    if (cc != CURLE_OK) {
        free (b.p);
        errno = EHOSTUNREACH;
        return fmb_errorf (error, "broker at %s: %s", socket, curl_easy_strerror (cc));
    }
    ret->status = code;
    ret->body = b.p ? json_loads (b.p, 0, NULL) : NULL;
    free (b.p);
    return 0;
}
