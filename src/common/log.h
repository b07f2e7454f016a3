/* log.h: logging for the programs (fmbrokerd, fmbroker-cxi, fmbroker).
 *
 * Libraries never log; they return errors.  Lines go to stderr.  When
 * stderr is not a terminal (journald, a file, a pipe) each line starts
 * with a syslog priority prefix such as "<3>" that journald turns into
 * the record's priority; on a terminal the level is spelled out instead.
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

void fmb_log (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Copy 'in' to 'out' with control characters (C0, DEL, C1) written as
 * \xNN, so that no logged string can start a line of its own or drive a
 * terminal.  fmb_log applies it to every line.  Returns the length. */
size_t fmb_log_escape (char *out, size_t outsize, const char *in);

/* Mask secrets in 'line' in place; exposed for tests. */
void fmb_log_redact (char *line);

#endif
