/* apitls_none.c: apitls.h without TLS, for a program that only ever
 * speaks to the broker's Unix socket (fmbroker-slurm-cleanup): a broker
 * named by [api] broker_url is refused here, saying so, and its caller
 * hands the call to one that speaks TLS (fmbroker). */
#include <errno.h>
#include <stdio.h>

#include "apitls.h"

bool api_tls_available (void)
{
    return false;
}

int api_tls_open (int fd,
                  const char *host,
                  const char *ca_file,
                  const struct api_tls_ticket *ticket,
                  int64_t by,
                  struct api_tls **out,
                  char *why,
                  size_t wlen)
{
    (void)fd, (void)host, (void)ca_file, (void)ticket, (void)by, (void)out;
    errno = EPROTONOSUPPORT;
    snprintf (
        why, wlen, "this program speaks to the broker's Unix socket only, not TLS");
    return -1;
}

int api_tls_read (struct api_tls *s, void *buf, int n, int64_t deadline)
{
    (void)s, (void)buf, (void)n, (void)deadline;
    errno = EPROTONOSUPPORT;
    return -1;
}

int api_tls_write (struct api_tls *s, const void *buf, int n, int64_t deadline)
{
    (void)s, (void)buf, (void)n, (void)deadline;
    errno = EPROTONOSUPPORT;
    return -1;
}

bool api_tls_idle_open (struct api_tls *s)
{
    (void)s;
    return false;
}

struct api_tls_ticket *api_tls_ticket_of (struct api_tls *s)
{
    (void)s;
    return NULL;
}

void api_tls_ticket_free (struct api_tls_ticket *t)
{
    (void)t;
}

void api_tls_close (struct api_tls *s)
{
    (void)s;
}
