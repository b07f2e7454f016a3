/* apitls.h: the TLS half of a broker call (apiclient.c): a session on a
 * connected socket, the broker's certificate verified, every read and
 * write bounded by a deadline.  Apart from the call so that a program
 * that only ever speaks to the broker's Unix socket links apitls_none.c
 * and never loads OpenSSL: EpilogSlurmctld's fmbroker-slurm-cleanup,
 * once per job as srun exits (bench/RESULTS.md §31).  apitls.c is
 * OpenSSL. */
#ifndef FMB_APITLS_H
#define FMB_APITLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct api_tls;        /* one session on a socket */
struct api_tls_ticket; /* a session kept to resume the next handshake by */

/* Is TLS built into this program (apitls.c), or not (apitls_none.c)? */
bool api_tls_available (void);

/* The handshake on the connected non-blocking socket fd, TLS 1.2 or later,
 * with 'host' (a name, sent as SNI and verified, or an address literal)
 * verified against ca_file (NULL: the system's CAs), done by 'by'
 * (fmb_monotime_ms); resumed from 'ticket' when not NULL (one the broker
 * no longer takes costs a full handshake).  0 and *out, or -1 with why. */
int api_tls_open (int fd,
                  const char *host,
                  const char *ca_file,
                  const struct api_tls_ticket *ticket,
                  int64_t by,
                  struct api_tls **out,
                  char *why,
                  size_t wlen);
/* Up to n bytes read or written by 'deadline': how many (> 0), else <= 0
 * (errno ETIMEDOUT when the deadline passed; 0 read: the broker closed). */
int api_tls_read (struct api_tls *s, void *buf, int n, int64_t deadline);
int api_tls_write (struct api_tls *s, const void *buf, int n, int64_t deadline);
/* An idle session whose socket reads ready: is it still open?  Records a
 * TLS 1.3 broker sends after its first answer (session tickets) are
 * read here; end of file, an error or an answer nobody asked for: not. */
bool api_tls_idle_open (struct api_tls *s);
/* The session's ticket, to resume the next one by (the caller's to
 * free), or NULL when it is not resumable. */
struct api_tls_ticket *api_tls_ticket_of (struct api_tls *s);
void api_tls_ticket_free (struct api_tls_ticket *t);
/* The session freed; its socket stays the caller's. */
void api_tls_close (struct api_tls *s);

#endif
