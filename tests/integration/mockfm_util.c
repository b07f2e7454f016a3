/* mockfm_util.c: see mockfm_util.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "mockfm_util.h"
#include "testutil.h"

void mockfm_start (struct mockfm *m, const char *dir, bool tls, const char *const *args)
{
    char bin[1024], portfile[600];
    const char *argv[64];
    int n = 0;
    const char *fmb_bin = getenv ("FMB_BIN");
    assert_non_null (fmb_bin);
    memset (m, 0, sizeof (*m));
    snprintf (m->dir, sizeof (m->dir), "%s", dir);
    snprintf (bin, sizeof (bin), "%s/mockfm", fmb_bin);
    snprintf (portfile, sizeof (portfile), "%s/fm.port", dir);
    snprintf (m->log, sizeof (m->log), "%s/fm.log", dir);
    unlink (portfile);
    argv[n++] = bin;
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    argv[n++] = "--request-log";
    argv[n++] = m->log;
    for (int i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    m->pid = fork ();
    assert_true (m->pid >= 0);
    if (m->pid == 0) {
        execv (bin, (char *const *)argv);
        _exit (127);
    }
    /* wait_for: up to 5 s for the port file */
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen (portfile, "r");
        if (f) {
            int ok = fscanf (f, "%d", &m->port);
            fclose (f);
            if (ok == 1)
                break;
        }
        int status;
        if (waitpid (m->pid, &status, WNOHANG) == m->pid)
            fail_msg ("mockfm exited early (status %d)", status);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep (&ts, NULL);
    }
    assert_true (m->port > 0);
    m->tls = tls;
    snprintf (
        m->url, sizeof (m->url), "%s://127.0.0.1:%d", tls ? "https" : "http", m->port);
}

void mockfm_stop (struct mockfm *m)
{
    if (m->pid > 0) {
        kill (m->pid, SIGTERM);
        waitpid (m->pid, NULL, 0);
        m->pid = 0;
    }
}

static size_t collect (char *data, size_t size, size_t nmemb, void *arg)
{
    char **buf = arg;
    size_t old = *buf ? strlen (*buf) : 0, n = size * nmemb;
    char *nb = realloc (*buf, old + n + 1);
    assert_non_null (nb);
    memcpy (nb + old, data, n);
    nb[old + n] = '\0';
    *buf = nb;
    return n;
}

long http_call (const char *method,
                const char *url,
                const char *auth,
                const char *body,
                char **resp)
{
    CURL *e = curl_easy_init ();
    struct curl_slist *h = NULL;
    char *buf = NULL, hdr[512];
    long code = 0;
    h = curl_slist_append (h, "Content-Type: application/json");
    h = curl_slist_append (h, "Expect:");
    if (auth) {
        snprintf (hdr, sizeof (hdr), "Authorization: %s", auth);
        h = curl_slist_append (h, hdr);
    }
    curl_easy_setopt (e, CURLOPT_URL, url);
    curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt (e, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt (e, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt (e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt (e, CURLOPT_SSL_VERIFYHOST, 0L);
    if (body)
        curl_easy_setopt (e, CURLOPT_POSTFIELDS, body);
    if (curl_easy_perform (e) == CURLE_OK)
        curl_easy_getinfo (e, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all (h);
    curl_easy_cleanup (e);
    if (resp)
        *resp = buf ? buf : strdup ("");
    else
        free (buf);
    return code;
}

json_t *mockfm_state (struct mockfm *m)
{
    char url[256], *resp;
    snprintf (url, sizeof (url), "%s/_mock/state", m->url);
    assert_int_equal (http_call ("GET", url, NULL, NULL, &resp), 200);
    json_t *o = json_loads (resp, 0, NULL);
    free (resp);
    assert_non_null (o);
    return o;
}

void mockfm_ctl (struct mockfm *m,
                 const char *method,
                 const char *path,
                 const char *body)
{
    char url[256], *resp;
    snprintf (url, sizeof (url), "%s%s", m->url, path);
    long code = http_call (method, url, NULL, body, &resp);
    if (code != 200)
        fail_msg ("%s %s: %ld %s", method, path, code, resp);
    free (resp);
}

int mockfm_log_count (struct mockfm *m, const char *line_prefix)
{
    FILE *f = fopen (m->log, "r");
    char line[1024];
    int n = 0;
    if (!f)
        return 0;
    while (fgets (line, sizeof (line), f))
        if (strncmp (line, line_prefix, strlen (line_prefix)) == 0)
            n++;
    fclose (f);
    return n;
}
