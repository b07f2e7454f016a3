/* brokerfix.c: a broker for unit tests (brokerfix.h). */
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "brokerfix.h"
#include "fmclient.h"
#include "http.h"
#include "lifecycle.h"
#include "outbox.h"
#include "pass.h"
#include "reservations.h"
#include "store.h"
#include "timer.h"
#include "log.h"
#include "testutil.h"

void fix_setup (struct fix *f, bool with_fm)
{
    memset (f, 0, sizeof (*f));
    f->dir = tu_mkdtemp ();
    f->with_fm = with_fm;
    if (with_fm)
        mockfm_start (&f->fm, f->dir, false, NULL);
    fix_open (f);
}

static void configure (struct fix *f)
{
    struct fmb_config *cfg = &f->b.cfg;
    struct passwd *pw = getpwuid (getuid ());
    assert_non_null (pw);
    fmb_config_defaults (cfg);
    snprintf (cfg->state_dir, sizeof (cfg->state_dir), "%s", f->dir);
    snprintf (cfg->socket, sizeof (cfg->socket), "%s/api.sock", f->dir);
    snprintf (cfg->rm_users, sizeof (cfg->rm_users), "%s", pw->pw_name);
    snprintf (cfg->admin_users, sizeof (cfg->admin_users), "%s", pw->pw_name);
    if (f->with_fm) {
        snprintf (cfg->fm_url, sizeof (cfg->fm_url), "%s", f->fm.url);
        cfg->fm_auth = FMB_AUTH_NONE;
        cfg->fm_allow_plain_http = true;
        cfg->fm_reserve_timeout_ms = 2000;
        cfg->fm_timeout_ms = 3000;
        cfg->hwcoll_addrs_per_job = 4; /* as the integration tests' broker */
    }
}

/* The contexts in fmbrokerd's order (lifecycle.c), the store opened
 * as main.c's open_state does, without the state lock. */
void fix_open (struct fix *f)
{
    struct broker *b = &f->b;
    struct fmb_error e = {{0}};
    memset (b, 0, sizeof (*b));
    b->lock.fd = -1;
    configure (f);
    char *db = tu_path (f->dir, "fmbroker.db"), *key = tu_path (f->dir, "token.key");
    assert_int_equal (broker_create_early (b), 0);
    assert_int_equal (store_open (db, key, &b->st, &e), 0);
    broker_attach_store (b);
    if (broker_create_serving (b, &e) < 0)
        fail_msg ("the broker did not start: %s", e.text);
    free (db);
    free (key);
}

void fix_close (struct fix *f)
{
    struct broker *b = &f->b;
    if (!b->st) /* not open (a test failed between close and open) */
        return;
    /* FM calls still out end first (an outbox call is freed by its answer) */
    for (int i = 0; i < 200 && b->fmc && fmc_inflight (b->fmc); i++)
        fix_pass (f, 10);
    broker_quiesce (b);
    reservations_shutdown (b->rsv);
    outbox_steps_answer_all (b->outbox);
    broker_destroy (b);
    memset (b, 0, sizeof (*b));
}

void fix_teardown (struct fix *f)
{
    if (!f->dir)
        return;
    fix_close (f);
    if (f->with_fm)
        mockfm_stop (&f->fm);
    tu_rmtree (f->dir);
}

#define FIX_FDS 64

void fix_pass (struct fix *f, int max_ms)
{
    struct broker *b = &f->b;
    struct pollfd fds[FIX_FDS];
    int nh = http_pollfds (b->http, fds, FIX_FDS), nf = 0;
    if (b->fmc)
        nf = fmc_pollfds (b->fmc, fds + nh, FIX_FDS - nh);
    int timeout = max_ms, t;
    if ((t = http_timeout_ms (b->http)) >= 0 && t < timeout)
        timeout = t;
    if (b->fmc && (t = fmc_timeout_ms (b->fmc)) >= 0 && t < timeout)
        timeout = t;
    int64_t due = timers_next_ms (b->timers, now_mono ());
    if (due >= 0 && due < timeout)
        timeout = (int)due;
    if (pass_flush_now (b->pass))
        timeout = 0;
    if (poll (fds, (nfds_t)(nh + nf), timeout) < 0)
        assert_int_equal (errno, EINTR);
    pass_begin (b->pass);
    if (b->fmc)
        fmc_process (b->fmc, fds + nh, nf);
    http_process (b->http, fds, nh);
    timers_run (b->timers, now_mono ());
    pass_end (b->pass);
    if (pass_flush_now (b->pass)) {
        pass_begin (b->pass);
        http_process (b->http, NULL, 0);
        http_process (b->http, NULL, 0);
        pass_end (b->pass);
    }
    pass_start_kept (b->pass);
}

bool fix_until (struct fix *f, bool (*cond) (struct fix *f), int ms)
{
    int64_t end = now_mono () + ms;
    while (!cond (f)) {
        if (now_mono () >= end)
            return false;
        fix_pass (f, 10);
    }
    return true;
}

/* The whole answer (the broker closes: Connection: close), or NULL. */
static char *read_answer (struct fix *f, int fd)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc (cap);
    int64_t end = now_mono () + 10000;
    assert_non_null (buf);
    while (now_mono () < end) {
        fix_pass (f, 5);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        while (poll (&p, 1, 0) == 1) {
            ssize_t n = recv (fd, buf + len, cap - len - 1, MSG_DONTWAIT);
            if (n == 0) {
                buf[len] = '\0';
                return buf;
            }
            if (n < 0)
                break;
            len += (size_t)n;
            assert_true (len < cap - 1);
        }
    }
    free (buf);
    return NULL;
}

int fix_request (struct fix *f,
                 const char *method,
                 const char *path,
                 const char *body,
                 json_t **reply)
{
    char head[1024];
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", f->b.cfg.socket);
    assert_true (fd >= 0);
    assert_int_equal (connect (fd, (struct sockaddr *)&sa, sizeof (sa)), 0);
    int n = snprintf (head,
                      sizeof (head),
                      "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      method,
                      path,
                      body ? strlen (body) : 0);
    assert_int_equal (send (fd, head, (size_t)n, MSG_NOSIGNAL), n);
    if (body)
        assert_int_equal (send (fd, body, strlen (body), MSG_NOSIGNAL),
                          (ssize_t)strlen (body));
    char *answer = read_answer (f, fd);
    close (fd);
    fix_pass (f, 0); /* the broker sees the close */
    assert_non_null (answer);
    int status = 0;
    assert_int_equal (sscanf (answer, "HTTP/1.%*d %d", &status), 1);
    const char *at = strstr (answer, "\r\n\r\n");
    if (reply)
        *reply = at ? json_loads (at + 4, 0, NULL) : NULL;
    free (answer);
    return status;
}

int fix_job_state (struct fix *f, const char *job, int *hwcoll)
{
    struct store_job *j;
    struct fmb_error e;
    if (store_job_get_brief (f->b.st, job, &j, &e) < 0)
        return -1;
    int state = (int)j->state;
    if (hwcoll)
        *hwcoll = (int)j->hwcoll;
    store_job_free (j);
    return state;
}
