/* test_apiclient.c: the broker client (apiclient.h) against a scripted
 * broker on a Unix socket in the test's own directory: what it sends,
 * what it makes of answers, and a broker that hangs up mid-request. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apiclient.h"
#include "config.h"
#include "monotime.h"
#include "testutil.h"

struct fixture {
    char *dir;
    char *sock;
    int lfd;
    struct fmb_config cfg;
    struct api_target target;
};

static int setup (void **state)
{
    struct fixture *f = calloc (1, sizeof (*f));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    f->dir = tu_mkdtemp ();
    f->sock = tu_path (f->dir, "api.sock");
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", f->sock);
    f->lfd = socket (AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal (bind (f->lfd, (struct sockaddr *)&sa, sizeof (sa)), 0);
    assert_int_equal (listen (f->lfd, 4), 0);
    fmb_config_defaults (&f->cfg);
    api_target_init (&f->target, &f->cfg, f->sock);
    *state = f;
    return 0;
}

static int teardown (void **state)
{
    struct fixture *f = *state;
    api_target_clear (&f->target);
    close (f->lfd);
    free (f->sock);
    tu_rmtree (f->dir);
    free (f);
    return 0;
}

/* A broker in a child: takes one connection, reads the request's header
 * (into 'request_file' when given), answers 'answer' (NULL: hangs up at
 * once, reading nothing; "": holds the connection, reading nothing,
 * until killed), and exits. */
static pid_t broker_once (struct fixture *f,
                          const char *answer,
                          const char *request_file)
{
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid > 0)
        return pid;
    int fd = accept (f->lfd, NULL, NULL);
    if (fd < 0)
        _exit (2);
    if (!answer) {
        close (fd);
        _exit (0);
    }
    if (!*answer)
        for (;;)
            pause ();
    char req[8192];
    size_t n = 0;
    while (n < sizeof (req) - 1) {
        ssize_t r = read (fd, req + n, sizeof (req) - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        req[n] = '\0';
        if (strstr (req, "\r\n\r\n"))
            break;
    }
    if (request_file) {
        FILE *out = fopen (request_file, "w");
        if (out) {
            fwrite (req, 1, n, out);
            fclose (out);
        }
    }
    (void)!write (fd, answer, strlen (answer));
    close (fd);
    _exit (0);
}

static void reap (pid_t pid)
{
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

static void json_answer_and_the_request_sent (void **state)
{
    struct fixture *f = *state;
    char *reqfile = tu_path (f->dir, "request");
    pid_t pid =
        broker_once (f,
                     "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                     "Content-Length: 13\r\n\r\n{\"vnis\": [7]}",
                     reqfile);
    struct api_reply r = {0};
    struct fmb_error e;
    assert_int_equal (api_client_call (&f->target,
                                       NULL,
                                       5,
                                       "PUT",
                                       "/v1/jobs/42",
                                       "{\"uid\": 1000}",
                                       "job-token",
                                       &r,
                                       &e),
                      0);
    reap (pid);
    assert_int_equal (r.status, 201);
    assert_int_equal (
        json_integer_value (json_array_get (json_object_get (r.body, "vnis"), 0)), 7);
    json_decref (r.body);
    size_t len;
    char *req = tu_slurp (reqfile, &len);
    assert_non_null (strstr (req, "PUT /v1/jobs/42 HTTP/1.1\r\n"));
    assert_non_null (strstr (req, "\r\nAuthorization: Bearer job-token\r\n"));
    assert_non_null (strstr (req, "\r\nContent-Length: 13\r\n"));
    free (req);
    /* over the socket, no bearer given: no Authorization at all */
    pid = broker_once (
        f, "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", reqfile);
    assert_int_equal (
        api_client_call (&f->target, NULL, 5, "GET", "/v1/health", NULL, NULL, &r, &e),
        0);
    reap (pid);
    assert_int_equal (r.status, 204);
    assert_null (r.body);
    req = tu_slurp (reqfile, &len);
    assert_null (strstr (req, "Authorization"));
    free (req);
    free (reqfile);
}

static void text_and_chunked_answers (void **state)
{
    struct fixture *f = *state;
    struct api_reply r = {0};
    struct fmb_error e;
    /* /metrics: not JSON, handed over as a JSON string */
    pid_t pid = broker_once (
        f,
        "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nfmb_jobs_active 3\n\n\n",
        NULL);
    assert_int_equal (
        api_client_call (&f->target, NULL, 5, "GET", "/metrics", NULL, NULL, &r, &e),
        0);
    reap (pid);
    assert_string_equal (json_string_value (r.body), "fmb_jobs_active 3\n\n\n");
    json_decref (r.body);
    /* chunked, and a 4xx with the broker's detail */
    pid = broker_once (f,
                       "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "9\r\n{\"detail\"\r\n10\r\n: \"no such job\"}\r\n0\r\n\r\n",
                       NULL);
    assert_int_equal (
        api_client_call (&f->target, NULL, 5, "GET", "/v1/jobs/9", NULL, NULL, &r, &e),
        0);
    reap (pid);
    assert_int_equal (r.status, 404);
    assert_string_equal (json_string_value (json_object_get (r.body, "detail")),
                         "no such job");
    json_decref (r.body);
}

/* A broker killed while the request is being written: an error naming
 * the socket, not a SIGPIPE that kills the caller (the CLI, slurmstepd's
 * step-end module, flux-broker). */
static void a_broker_that_hangs_up_is_an_error_not_a_signal (void **state)
{
    struct fixture *f = *state;
    struct api_reply r = {0};
    struct fmb_error e;
    size_t big = 4 * 1024 * 1024; /* more than the socket buffers hold */
    char *body = malloc (big + 1);
    memset (body, ' ', big);
    body[big] = '\0';
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
    sigaction (SIGPIPE, &dfl, &old);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        /* in a child: without the fix, SIGPIPE ends it (status 141) */
        pid_t b = broker_once (f, NULL, NULL);
        int rc = api_client_call (
            &f->target, NULL, 5, "PUT", "/v1/jobs/1", body, NULL, &r, &e);
        sigset_t pending;
        sigpending (&pending);
        bool ok = rc == -1 && errno == EHOSTUNREACH && strstr (e.text, f->sock) &&
                  sigismember (&pending, SIGPIPE) == 0;
        waitpid (b, NULL, 0);
        _exit (ok ? 0 : 1);
    }
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    /* this process's own mask is as it was: SIGPIPE not left blocked */
    sigset_t mask;
    sigprocmask (SIG_BLOCK, NULL, &mask);
    assert_int_equal (sigismember (&mask, SIGPIPE), 0);
    sigaction (SIGPIPE, &old, NULL);
    free (body);
}

/* A broker that takes the connection and never reads: the call ends
 * at its timeout, not a timeout per blocked write (nor tries again). */
static void a_broker_that_never_reads_gets_one_timeout (void **state)
{
    struct fixture *f = *state;
    struct api_reply r = {0};
    struct fmb_error e;
    size_t big = 4 * 1024 * 1024;
    char *body = malloc (big + 1);
    memset (body, ' ', big);
    body[big] = '\0';
    pid_t pid = broker_once (f, "", NULL);
    int64_t t0 = fmb_monotime_ms ();
    int rc =
        api_client_call (&f->target, NULL, 1, "PUT", "/v1/jobs/1", body, NULL, &r, &e);
    int64_t took = fmb_monotime_ms () - t0;
    kill (pid, SIGKILL);
    waitpid (pid, NULL, 0);
    assert_int_equal (rc, -1);
    assert_non_null (strstr (e.text, "Operation timed out"));
    print_message ("the 1 s call ended after %lld ms\n", (long long)took);
    assert_true (took >= 1000);
    assert_true (took < 1900); /* it was 2 s and more: each write had 1 s */
    free (body);
}

/* A broker that takes no connection (its queue full: stalled, or
 * stopped): connect() would wait for a slot; the call ends at its
 * timeout (it blocked for good before). */
static void a_full_connection_queue_gets_one_timeout (void **state)
{
    struct fixture *f = *state;
    struct api_reply r = {0};
    struct fmb_error e;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int held[8], n = 0;
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", f->sock);
    assert_int_equal (listen (f->lfd, 0), 0); /* the smallest queue */
    for (; n < 8; n++) {                      /* filled by connections nobody accepts */
        held[n] = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect (held[n], (struct sockaddr *)&sa, sizeof (sa)) < 0) {
            close (held[n]);
            break;
        }
    }
    assert_true (n < 8);
    int64_t t0 = fmb_monotime_ms ();
    int rc =
        api_client_call (&f->target, NULL, 1, "GET", "/v1/health", NULL, NULL, &r, &e);
    int64_t took = fmb_monotime_ms () - t0;
    while (n-- > 0)
        close (held[n]);
    assert_int_equal (rc, -1);
    assert_non_null (strstr (e.text, "Connection timed out"));
    assert_true (took < 1900);
}

static void no_broker_names_the_socket_and_why (void **state)
{
    struct fixture *f = *state;
    struct api_reply r = {0};
    struct fmb_error e;
    char *gone = tu_path (f->dir, "nobody.sock");
    struct api_target t;
    api_target_init (&t, &f->cfg, gone);
    assert_int_equal (
        api_client_call (&t, NULL, 5, "GET", "/v1/health", NULL, NULL, &r, &e), -1);
    assert_int_equal (errno, EHOSTUNREACH);
    assert_non_null (strstr (e.text, gone));
    assert_non_null (strstr (e.text, "no such socket: is fmbrokerd running"));
    api_target_clear (&t);
    free (gone);
}

static void path_segments_are_escaped (void **state)
{
    (void)state;
    char out[64];
    assert_int_equal (api_path_escape ("/inner/f3Ya.b_c~-", out, sizeof (out)), 0);
    assert_string_equal (out, "%2Finner%2Ff3Ya.b_c~-");
    assert_int_equal (api_path_escape ("a b?&=%\xc3\xa9", out, sizeof (out)), 0);
    assert_string_equal (out, "a%20b%3F%26%3D%25%C3%A9");
    assert_int_equal (api_path_escape ("", out, sizeof (out)), 0);
    assert_string_equal (out, "");
    /* "a/" needs 5 bytes with its NUL: 4 is too few, and nothing half */
    assert_int_equal (api_path_escape ("a/", out, 4), -1);
    assert_int_equal (errno, ENAMETOOLONG);
    assert_string_equal (out, "");
    assert_int_equal (api_path_escape ("a/", out, 5), 0);
    assert_string_equal (out, "a%2F");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (
            json_answer_and_the_request_sent, setup, teardown),
        cmocka_unit_test_setup_teardown (text_and_chunked_answers, setup, teardown),
        cmocka_unit_test_setup_teardown (
            a_broker_that_hangs_up_is_an_error_not_a_signal, setup, teardown),
        cmocka_unit_test_setup_teardown (
            a_broker_that_never_reads_gets_one_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown (
            a_full_connection_queue_gets_one_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown (
            no_broker_names_the_socket_and_why, setup, teardown),
        cmocka_unit_test (path_segments_are_escaped),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
