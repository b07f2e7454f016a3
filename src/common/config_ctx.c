/* config_ctx.c: the problems of one load (config_ctx.h). */
#include "config_ctx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "config_keys.h"

/* Record one problem (the first is also ctx->error); loading goes on, so
 * that --check-config and start name every problem at once. */
void cfg_ctx_error (struct parse_ctx *ctx, const char *fmt, ...)
{
    char text[FMB_ERROR_TEXT_MAX];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (text, sizeof (text), fmt, ap);
    va_end (ap);
    if (ctx->nerrors == 0)
        snprintf (ctx->error.text, sizeof (ctx->error.text), "%s", text);
    if (ctx->nerrors < CFG_ERRORS_MAX)
        snprintf (ctx->errors[ctx->nerrors], sizeof (ctx->errors[0]), "%s", text);
    ctx->nerrors++;
    ctx->failed = true;
    errno = EINVAL;
}

/* Format "NAME:LINE: [sec] key = value: " into 'e' then the reason. */
int cfg_fail (
    struct parse_ctx *ctx, const char *section, const char *key, const char *fmt, ...)
{
    char reason[FMB_ERROR_TEXT_MAX];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (reason, sizeof (reason), fmt, ap);
    va_end (ap);
    int i = cfg_key_index (section, key);
    char where[FMB_CFG_PATH_MAX + 16];
    int line = i >= 0 ? ctx->lines[i] : 0;
    if (line > 0)
        snprintf (where, sizeof (where), "%s:%d", ctx->name, line);
    else /* -1: the value came from the command line */
        snprintf (where, sizeof (where), "%s", line < 0 ? "command line" : ctx->name);
    cfg_ctx_error (ctx,
                   "%s: [%s] %s%s: %s",
                   where,
                   section,
                   key,
                   line == 0 ? " (default)" : "",
                   reason);
    return -1;
}
