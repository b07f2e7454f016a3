/* config_ctx.h: one load of the configuration (the values so far, where
 * each key was set, every problem found), shared by the loader
 * (config.c) and the rules between keys (config_rules.c).  Inside
 * src/common only. */
#ifndef FMB_COMMON_CONFIG_CTX_H
#define FMB_COMMON_CONFIG_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Problems kept from one load: a file with more is cut short, saying how
 * many more there were. */
#define CFG_ERRORS_MAX 20

struct parse_ctx {
    struct fmb_config cfg;
    const char *name;
    int lines[FMB_CFG_KEYS_MAX]; /* where each key was set, 0 if not set */
    bool failed;                 /* 'error' holds the first problem, 'errors' each */
    struct fmb_error error;
    char errors[CFG_ERRORS_MAX][FMB_ERROR_TEXT_MAX];
    int nerrors;          /* may exceed CFG_ERRORS_MAX: the rest are counted */
    bool stop;            /* the text cannot be read on (a line too long) */
    char bad_section[64]; /* an unknown section, said once */
    /* the text being parsed, fed to inih one line at a time */
    const char *text;
    size_t pos;
    int lineno;
    bool client; /* read only the keys a client uses (cfg_client_key) */
};

/* Record one problem (the first is also ctx->error); loading goes on, so
 * that --check-config and start name every problem at once. */
__attribute__ ((format (printf, 2, 3))) void cfg_ctx_error (struct parse_ctx *ctx,
                                                            const char *fmt,
                                                            ...);

/* Format "NAME:LINE: [sec] key = value: " into 'e' then the reason; -1. */
__attribute__ ((format (printf, 4, 5))) int cfg_fail (
    struct parse_ctx *ctx, const char *section, const char *key, const char *fmt, ...);

#endif
