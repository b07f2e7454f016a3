/* log.h: logging for the programs (fmbrokerd, fmbroker-cxi, fmbroker).
 *
 * Libraries never log; they return errors.  Under systemd (stderr is the
 * stream named by $JOURNAL_STREAM) records go to journald through
 * sd_journal_send, with PRIORITY and, when the caller gives them, the
 * fields JOB=, STEP=, NODE= and FM_CALL= (`journalctl JOB=42`).
 * Otherwise (a terminal, a file, a pipe) a plain line goes to stderr:
 * "IDENT: LEVEL: message".
 *
 * Secrets: callers must not pass tokens or passwords, and as a second
 * line of defence the logger masks anything that follows "Bearer ",
 * "access_token", "client_secret=", "sessionToken" or "password".
 */
#ifndef FMB_LOG_H
#define FMB_LOG_H

#include <stdbool.h>
#include <syslog.h>

/* ident: program name.  level: the most verbose level printed (LOG_INFO..). */
void fmb_log_init (const char *ident, int level);
void fmb_log_set_level (int level);

/* "debug", "info", "notice", "warning", "error" -> LOG_*; -1 if unknown. */
int fmb_log_level_parse (const char *name);
/* LOG_* -> its name, as fmb_log_level_parse takes it. */
const char *fmb_log_level_name (int level);

/* Every record to syslog (LOG_DAEMON) as well: for a program whose
 * output its starter keeps from everyone (slurmd's Prolog=). */
void fmb_log_syslog (void);

void fmb_log (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Structured fields of a record (NULL: absent).  Outside journald they
 * are not printed: the message itself should name what it is about. */
struct fmb_log_fields {
    const char *job;
    const char *step;
    const char *node;
    const char *fm_call;
};
void fmb_logf (int level, const struct fmb_log_fields *fields, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Copy 'in' to 'out' with control characters (C0, DEL, C1) written as
 * \xNN, so that no logged string can start a line of its own or drive a
 * terminal.  fmb_log applies it to every line.  Returns the length. */
size_t fmb_log_escape (char *out, size_t outsize, const char *in);

/* Mask secrets in 'line' in place; exposed for tests. */
void fmb_log_redact (char *line);

#endif
