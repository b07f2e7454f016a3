/* validate.c: see validate.h. */
#include <stdio.h>
#include <string.h>

#include "validate.h"

static bool name_char (char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* A user name may also hold what directories put in theirs: sssd's fully
 * qualified names (user@domain), winbind's DOMAIN\\user (and +, a common
 * separator), Samba machine accounts (host$). */
static bool user_char (char c)
{
    return name_char (c) || c == '@' || c == '\\' || c == '+' || c == '$';
}

static bool chars_of (const char *s, size_t max, bool (*ok) (char))
{
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= max || !ok (s[n]))
            return false;
    return n > 0;
}

static bool name_of (const char *s, size_t max)
{
    return chars_of (s, max, name_char);
}

bool valid_job_id (const char *s)
{
    return name_of (s, JOB_ID_MAX) && strcmp (s, ".") != 0 && strcmp (s, "..") != 0;
}

bool valid_node_name (const char *s)
{
    return name_of (s, NODE_NAME_MAX) && s[0] != '.' && s[0] != '-';
}

bool valid_user_name (const char *s)
{
    return chars_of (s, USER_NAME_MAX, user_char);
}

bool valid_utf8 (const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p++;
        unsigned need, min;
        if (c == 0)
            return false;
        if (c < 0x80)
            continue;
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, min = 0x10000;
        else
            return false;
        unsigned cp = c & (0x3f >> need);
        if ((size_t)(end - p) < need)
            return false;
        for (unsigned i = 0; i < need; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        p += need;
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
    }
    return true;
}

/* No control characters: a step id reaches logs and the FM, and neither
 * Slurm step ids nor Flux job-id paths contain any.  C1 controls
 * (U+0080..U+009F) are 0xc2 0x80..0x9f in UTF-8. */
bool valid_step_id (const char *s, size_t len)
{
    if (len == 0 || len > STEP_ID_MAX || !valid_utf8 (s, len))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f ||
            (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] <= 0x9f))
            return false;
    }
    return true;
}

static int hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long percent_decode (const char *in, size_t inlen, char *out, size_t outsize)
{
    size_t o = 0;
    for (size_t i = 0; i < inlen; i++) {
        char c = in[i];
        if (c == '%') {
            int hi, lo;
            if (i + 2 >= inlen)
                return -1;
            hi = hexval (in[i + 1]);
            lo = hexval (in[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '\0')
            return -1;
        if (o + 1 >= outsize)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return (long)o;
}

/* Match 'path' (raw, undecoded) against a route pattern; fill params.
 * 1: match, 0: no match, -1: matched the shape but a parameter is bad
 * (message in 'why'). */
int api_match_path (const char *pattern,
                    const char *path,
                    struct api_params *params,
                    char *why,
                    size_t whylen)
{
    const char *p = pattern, *u = path;
    memset (params, 0, sizeof (*params)); /* nothing from an earlier match */
    while (*p && *u) {
        if (*p != '/' || *u != '/')
            return 0;
        p++;
        u++;
        const char *pend = strchrnul (p, '/');
        const char *uend = strchrnul (u, '/');
        if (*p == '{') {
            char name[16];
            snprintf (name, sizeof (name), "%.*s", (int)(pend - p - 2), p + 1);
            if (strcmp (name, "step") == 0 && *pend == '\0')
                uend = u + strlen (u); /* the last parameter takes the rest */
            char *out;
            size_t outsize;
            if (strcmp (name, "job") == 0)
                out = params->job, outsize = sizeof (params->job);
            else if (strcmp (name, "step") == 0)
                out = params->step, outsize = sizeof (params->step);
            else
                out = params->node, outsize = sizeof (params->node);
            long n = percent_decode (u, (size_t)(uend - u), out, outsize);
            bool ok = n > 0;
            if (ok && strcmp (name, "job") == 0)
                ok = valid_job_id (out);
            else if (ok && strcmp (name, "step") == 0) {
                ok = valid_step_id (out, (size_t)n);
                params->step_len = ok ? (size_t)n : 0;
            } else if (ok)
                ok = valid_node_name (out);
            if (!ok) {
                static const char *const rules[] = {
                    "job ids are 1-128 characters of [A-Za-z0-9._-]",
                    "step ids are 1-256 bytes of valid UTF-8 without control "
                    "characters, "
                    "percent-encoded",
                    "node names are 1-64 characters of [A-Za-z0-9._-]",
                };
                int r = name[0] == 'j' ? 0 : name[0] == 's' ? 1 : 2;
                snprintf (why, whylen, "bad %s in path: %s", name, rules[r]);
                return -1;
            }
        } else if ((pend - p) != (uend - u) || strncmp (p, u, (size_t)(pend - p)) != 0)
            return 0;
        p = pend;
        u = uend;
    }
    return *p == '\0' && *u == '\0';
}
