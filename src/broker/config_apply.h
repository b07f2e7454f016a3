/* config_apply.h: the checks start-up and --check-config share, and the
 * live reload (config_apply.c). */
#ifndef FMB_CONFIG_APPLY_H
#define FMB_CONFIG_APPLY_H

#include "config.h"
#include "error.h"
#include "svccheck.h"

struct broker;

/* What start needs beyond a parsed configuration (FM credentials, CA and
 * client certificates, the TCP listener's files), checked without side
 * effects: start and --check-config both call it. */
int broker_check_config (const struct fmb_config *cfg, struct fmb_error *error);
/* The same checks, every problem reported (not only the first), with the
 * state directory and the socket's directory as this process's user;
 * returns how many there were.  'flags': SVCCHECK_* (svccheck.h). */
int broker_check_all (const struct fmb_config *cfg,
                      unsigned flags,
                      svccheck_report_f report,
                      void *arg);
/* Reload: take 'next' (loaded and checked) as the running configuration.
 * Every key changes live but those listed in config_apply.c's
 * restart_keys, which keep their old values (logged); returns how many
 * of those changed, or -1 (nothing changed) if a file it re-reads (the
 * tokens file) is bad. */
int broker_apply_config (struct broker *b,
                         struct fmb_config *next,
                         struct fmb_error *error);

#endif
