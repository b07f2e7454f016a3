/* config.c: loading fmbroker.conf: the file read line by line through
 * inih, each assignment applied to its key (config_keys.h), the command
 * line's overrides, the rules between keys (config_rules.h) once at the
 * end, every problem reported.  The key table and the defaults:
 * config_keys.c; the values' checks: config_values.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config_ctx.h"
#include "config_keys.h"
#include "config_rules.h"
#include "fileutil.h"

#define CFG_FILE_MAX (1024 * 1024) /* a config file is a few KiB */

/* inih reader: hand out one line, counting lines so that the handler
 * can name them (Debian's libinih is built without INI_HANDLER_LINENO).
 * inih's line buffer is fixed; a longer line is refused, not split. */
static char *ini_reader_cb (char *str, int num, void *arg)
{
    struct parse_ctx *ctx = arg;
    const char *p = ctx->text + ctx->pos;
    if (*p == '\0' || ctx->stop)
        return NULL;
    const char *nl = strchr (p, '\n');
    size_t len = nl ? (size_t)(nl - p) + 1 : strlen (p);
    ctx->lineno++;
    if (len >= (size_t)num) {
        ctx->stop = true;
        cfg_ctx_error (
            ctx, "%s:%d: line longer than %d bytes", ctx->name, ctx->lineno, num - 2);
        return NULL;
    }
    memcpy (str, p, len);
    str[len] = '\0';
    ctx->pos += len;
    return str;
}

/* 'value' for a message, with the user:password@ of a URL in it as
 * "***@": a refused value is shown, a secret never is. */
static const char *without_userinfo (const char *value, char *out, size_t len)
{
    const char *scheme = strstr (value, "://");
    const char *at = scheme ? strchr (scheme + 3, '@') : NULL;
    if (!at || memchr (scheme + 3, '/', (size_t)(at - scheme - 3)))
        return value;
    snprintf (out, len, "%.*s***%s", (int)(scheme + 3 - value), value, at);
    return out;
}

static int config_handler (void *arg,
                           const char *section,
                           const char *name,
                           const char *value)
{
    struct parse_ctx *ctx = arg;
    int lineno = ctx->lineno;
    if (ctx->client && !cfg_client_key (section, name))
        return 1; /* the broker's to judge; defaults here */
    char where[FMB_CFG_PATH_MAX + 16];
    if (lineno > 0)
        snprintf (where, sizeof (where), "%s:%d", ctx->name, lineno);
    else
        snprintf (where, sizeof (where), "%s", ctx->name);
    const struct cfg_key *k = cfg_key_find (section, name);
    struct fmb_error inner;
    if (!k) {
        if (!section[0])
            cfg_ctx_error (ctx, "%s: %s: a key before any [section]", where, name);
        else if (!cfg_section_known (section)) {
            if (strcmp (ctx->bad_section, section) == 0)
                return 1; /* said at its first key */
            snprintf (ctx->bad_section, sizeof (ctx->bad_section), "%s", section);
            cfg_ctx_error (ctx, "%s: [%s]: unknown section", where, section);
        } else
            cfg_ctx_error (ctx, "%s: [%s] %s: unknown key", where, section, name);
        return 1; /* recorded; read on */
    }
    int i = (int)(k - cfg_keys);
    if (ctx->lines[i] && lineno > 0) {
        cfg_ctx_error (ctx,
                       "%s: [%s] %s: set twice (first at line %d)",
                       where,
                       section,
                       name,
                       ctx->lines[i]);
        return 1; /* recorded; read on */
    }
    ctx->lines[i] = lineno > 0 ? lineno : -1; /* -1: set on the command line */
    if (cfg_key_apply (&ctx->cfg, k, value, &inner) < 0) {
        char shown[FMB_CFG_PATH_MAX];
        cfg_ctx_error (ctx,
                       "%s: [%s] %s = %s: %s",
                       where,
                       section,
                       name,
                       without_userinfo (value, shown, sizeof (shown)),
                       inner.text);
        return 1; /* recorded; read on */
    }
    return 1;
}

/* Every problem of a failed load: through 'report' when given (then
 * 'error' says how many), else the first in 'error'. */
static int report_errors (struct parse_ctx *ctx,
                          fmb_config_report_f report,
                          void *arg,
                          struct fmb_error *error)
{
    int kept = ctx->nerrors < CFG_ERRORS_MAX ? ctx->nerrors : CFG_ERRORS_MAX;
    if (!report) {
        if (ctx->nerrors > 1)
            return fmb_errorf (
                error, "%s (and %d more)", ctx->error.text, ctx->nerrors - 1);
        return fmb_errorf (error, "%s", ctx->error.text);
    }
    for (int i = 0; i < kept; i++)
        report (ctx->errors[i], arg);
    if (ctx->nerrors > kept) {
        char more[64];
        snprintf (more, sizeof (more), "... and %d more", ctx->nerrors - kept);
        report (more, arg);
    }
    errno = EINVAL;
    return fmb_errorf (error,
                       "%s: %d problem%s",
                       ctx->name,
                       ctx->nerrors,
                       ctx->nerrors > 1 ? "s" : "");
}

static int finish_load (struct fmb_config *cfg,
                        struct parse_ctx *ctx,
                        int rc,
                        fmb_config_report_f report,
                        void *arg,
                        struct fmb_error *error)
{
    if (rc == -2) {
        errno = ENOMEM;
        return fmb_errorf (error, "%s: out of memory", ctx->name);
    }
    if (rc > 0)
        cfg_ctx_error (ctx, "%s:%d: syntax error", ctx->name, rc);
    /* The rules between keys, once every key has a value it may have. */
    if (!ctx->failed)
        (void)(ctx->client ? cfg_client_validate (ctx) : cfg_validate (ctx));
    if (ctx->failed)
        return report_errors (ctx, report, arg, error);
    for (size_t i = 0; i < cfg_nkeys; i++)
        if (ctx->lines[i]) /* fmb_config_set keeps the file's other lines */
            ctx->cfg.lines[i] = ctx->lines[i];
    *cfg = ctx->cfg;
    return 0;
}

/* Split "section.key=value" and feed it to the handler as if it were a
 * line of the file (line 0: the command line). */
static void apply_assignment (struct parse_ctx *ctx, const char *assignment)
{
    char section[64], key[64];
    const char *dot = strchr (assignment, '.');
    const char *eq = strchr (assignment, '=');
    if (!dot || !eq || dot > eq || (size_t)(dot - assignment) >= sizeof (section) ||
        (size_t)(eq - dot - 1) >= sizeof (key)) {
        cfg_ctx_error (ctx, "'%s': expected SECTION.KEY=VALUE", assignment);
        return;
    }
    snprintf (section, sizeof (section), "%.*s", (int)(dot - assignment), assignment);
    snprintf (key, sizeof (key), "%.*s", (int)(eq - dot - 1), dot + 1);
    const char *saved_name = ctx->name;
    int saved_line = ctx->lineno;
    ctx->name = "command line";
    ctx->lineno = 0;
    config_handler (ctx, section, key, eq + 1);
    ctx->name = saved_name;
    ctx->lineno = saved_line;
}

/* Parse 'text' (may be NULL: defaults only), apply the overrides in
 * 'sets', then validate once: the rules that involve several keys see
 * the final values, whatever the order of the overrides. */
static int parse_text (struct fmb_config *cfg,
                       const char *name,
                       const char *source,
                       const char *text,
                       const char *const *sets,
                       int nsets,
                       bool client,
                       fmb_config_report_f report,
                       void *arg,
                       struct fmb_error *error)
{
    struct parse_ctx *ctx = calloc (1, sizeof (*ctx));
    if (!ctx)
        return fmb_errorf (error, "%s: out of memory", name);
    ctx->client = client;
    fmb_config_defaults (&ctx->cfg);
    snprintf (ctx->cfg.source, sizeof (ctx->cfg.source), "%s", source);
    ctx->name = name;
    ctx->text = text ? text : "";
    int rc = ini_parse_stream (ini_reader_cb, ctx, config_handler, ctx);
    for (int i = 0; rc != -2 && i < nsets; i++)
        apply_assignment (ctx, sets[i]);
    rc = finish_load (cfg, ctx, rc, report, arg, error);
    int saved = errno;
    free (ctx);
    errno = saved;
    return rc;
}

static int load_file (struct fmb_config *cfg,
                      const char *path,
                      bool client,
                      struct fmb_error *error)
{
    char *text;
    if (fmb_read_file (path, CFG_FILE_MAX, false, &text, NULL, error) < 0)
        return -1;
    int rc = parse_text (cfg, path, path, text, NULL, 0, client, NULL, NULL, error);
    int saved = errno;
    free (text);
    errno = saved;
    return rc;
}

int fmb_config_load (struct fmb_config *cfg, const char *path, struct fmb_error *error)
{
    return load_file (cfg, path, false, error);
}

int fmb_config_load_client (struct fmb_config *cfg,
                            const char *path,
                            struct fmb_error *error)
{
    return load_file (cfg, path, true, error);
}

int fmb_config_load_string (struct fmb_config *cfg,
                            const char *name,
                            const char *text,
                            struct fmb_error *error)
{
    return parse_text (cfg, name, "", text, NULL, 0, false, NULL, NULL, error);
}

int fmb_config_load_with_sets (struct fmb_config *cfg,
                               const char *path,
                               const char *const *sets,
                               int nsets,
                               struct fmb_error *error)
{
    return fmb_config_load_all (cfg, path, sets, nsets, NULL, NULL, error);
}

int fmb_config_load_all (struct fmb_config *cfg,
                         const char *path,
                         const char *const *sets,
                         int nsets,
                         fmb_config_report_f report,
                         void *arg,
                         struct fmb_error *error)
{
    char *text = NULL;
    if (path && fmb_read_file (path, CFG_FILE_MAX, false, &text, NULL, error) < 0)
        return -1;
    int rc = parse_text (cfg,
                         path ? path : "built-in defaults",
                         path ? path : "",
                         text,
                         sets,
                         nsets,
                         false,
                         report,
                         arg,
                         error);
    int saved = errno;
    free (text);
    errno = saved;
    return rc;
}

int fmb_config_set (struct fmb_config *cfg,
                    const char *assignment,
                    struct fmb_error *error)
{
    struct parse_ctx *ctx = calloc (1, sizeof (*ctx));
    if (!ctx)
        return fmb_errorf (error, "out of memory");
    ctx->cfg = *cfg;
    ctx->name = "command line";
    apply_assignment (ctx, assignment);
    int rc = finish_load (cfg, ctx, 0, NULL, NULL, error);
    int saved = errno;
    free (ctx);
    errno = saved;
    return rc;
}
