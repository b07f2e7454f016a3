/* fuzz_dispatch.c: the REST API's dispatcher as a whole.  Each input is
 * the raw bytes a local client sends on the broker's Unix socket: request
 * line, headers, body.  A real broker (VNI-only, store in a temporary
 * directory, the real routes) serves it through libmicrohttpd, so routing,
 * percent-decoding, query checks, identification (SO_PEERCRED),
 * authorisation, body parsing and the handlers all see it.  A crash, a
 * sanitizer report or an answer that is not HTTP is a bug.
 *
 * Inputs that ask to wait (?wait=) are skipped: a long poll would hold
 * its connection past the input, and t1010/t1120 cover waiting. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker.h"
#include "http.h"
#include "lifecycle.h"
#include "pass.h"
#include "store.h"
#include "log.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static struct broker b;
static char sock_path[108];
static char tmp_dir[64];

static int remove_one (const char *path,
                       const struct stat *sb,
                       int flag,
                       struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove (path);
}

static void teardown (void)
{
    broker_destroy (&b);
    nftw (tmp_dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void serve_pass (void)
{
    struct pollfd fds[4];
    int n = http_pollfds (b.http, fds, 4);
    (void)poll (fds, (nfds_t)n, 0); /* what is ready, as the loop sees it */
    pass_begin (b.pass);
    http_process (b.http, fds, n);
    pass_end (b.pass);
    http_process (b.http, NULL, 0);
}

static int setup (void)
{
    struct fmb_error e;
    char dir[] = "/tmp/fuzz_dispatch.XXXXXX";
    if (!mkdtemp (dir))
        return -1;
    snprintf (tmp_dir, sizeof (tmp_dir), "%s", dir);
    atexit (teardown);
    fmb_log_init ("fuzz_dispatch", LOG_EMERG); /* quiet */
    fmb_config_defaults (&b.cfg);
    snprintf (b.cfg.state_dir, sizeof (b.cfg.state_dir), "%s/state", dir);
    snprintf (b.cfg.socket, sizeof (b.cfg.socket), "%s/api.sock", dir);
    snprintf (sock_path, sizeof (sock_path), "%s", b.cfg.socket);
    char db[600], key[600];
    snprintf (db, sizeof (db), "%s/fmbroker.db", dir);
    snprintf (key, sizeof (key), "%s/token.key", dir);
    /* the broker's contexts as fmbrokerd makes them (lifecycle.c),
     * VNI-only: no FM url */
    if (broker_create_early (&b) < 0) {
        fprintf (stderr, "fuzz_dispatch: setup: out of memory\n");
        return -1;
    }
    if (store_open (db, key, &b.st, &e) < 0) {
        fprintf (stderr, "fuzz_dispatch: setup: %s\n", e.text);
        return -1;
    }
    broker_attach_store (&b);
    if (broker_create_serving (&b, &e) < 0) {
        fprintf (stderr, "fuzz_dispatch: setup: %s\n", e.text);
        return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        if (setup () < 0)
            abort ();
        ready = 1;
    }
    if (size > 64 * 1024 || memmem (data, size, "wait", 4))
        return 0;
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy (sa.sun_path, sock_path, strlen (sock_path));
    if (fd < 0 || connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0)
        abort ();
    size_t off = 0;
    char answer[512];
    ssize_t got = 0;
    /* Bounded: the broker answers within a few passes or not at all
     * (an incomplete request waits for more; that is not a bug). */
    for (int pass = 0; pass < 40; pass++) {
        if (off < size) {
            ssize_t n = send (fd, data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0)
                off += (size_t)n;
            if (off == size)
                shutdown (fd, SHUT_WR);
        }
        serve_pass ();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll (&p, 1, 0) == 1) {
            got = recv (fd, answer, sizeof (answer) - 1, MSG_DONTWAIT);
            break;
        }
    }
    if (got > 0) {
        answer[got] = '\0';
        if (getenv ("FUZZ_DISPATCH_SHOW")) /* seeing what a corpus does */
            fprintf (stderr, "%.*s\n", (int)strcspn (answer, "\r"), answer);
        if (strncmp (answer, "HTTP/1.", 7) != 0)
            __builtin_trap (); /* whatever came in, HTTP goes out */
    }
    close (fd);
    serve_pass (); /* the broker sees the close and frees the connection */
    return 0;
}
