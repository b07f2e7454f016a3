/* config_values.c: the values of fmbroker.conf keys, checked and parsed
 * (config_values.h), and the tables they are checked against (traffic
 * classes, CXI resources). */
#include "config_values.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netaddr.h"

const char *const fmb_cxi_rsrc_names[FMB_CXI_NRSRC] = {
    "txqs",
    "tgqs",
    "eqs",
    "cts",
    "tles",
    "ptes",
    "les",
    "acs",
};

/* Per-resource defaults (max / def per core), as HPE's Slurm plugin uses
 * them since 25.05; res 0 means "def x allocated cores". */
static const struct fmb_cxi_limit cxi_limit_defaults[FMB_CXI_NRSRC] = {
    {1024, 0, 2},   /* txqs */
    {512, 0, 1},    /* tgqs */
    {2047, 0, 2},   /* eqs */
    {2047, 0, 1},   /* cts */
    {2048, 0, 1},   /* tles */
    {2048, 0, 6},   /* ptes */
    {16384, 0, 16}, /* les */
    {1022, 0, 2},   /* acs */
};

static const struct {
    const char *name;
    unsigned bit;
} tc_names[] = {
    {"DEDICATED_ACCESS", FMB_TC_DEDICATED_ACCESS},
    {"LOW_LATENCY", FMB_TC_LOW_LATENCY},
    {"BULK_DATA", FMB_TC_BULK_DATA},
    {"BEST_EFFORT", FMB_TC_BEST_EFFORT},
};

int cfg_check_cluster (char *value, struct fmb_error *error)
{
    /* The cluster name prefixes every FM job id ("{cluster}-{job}") and the
     * reconciler deletes only ids that start with "{cluster}-": a '-' in the
     * name would let cluster "a" reap cluster "a-b"'s jobs. */
    if (value[0] == '\0')
        return fmb_errorf (error, "must not be empty");
    for (const char *p = value; *p; p++)
        if (!isalnum ((unsigned char)*p) && *p != '_')
            return fmb_errorf (error, "only letters, digits and '_' are allowed");
    return 0;
}

int cfg_check_abs_path (char *value, struct fmb_error *error)
{
    if (value[0] != '/')
        return fmb_errorf (error, "must be an absolute path");
    return 0;
}

int cfg_check_path_or_empty (char *value, struct fmb_error *error)
{
    return value[0] ? cfg_check_abs_path (value, error) : 0;
}

/* The broker's TCP listener speaks only TLS. */
int cfg_check_https_url (char *value, struct fmb_error *error)
{
    if (value[0] && strncmp (value, "https://", 8) != 0)
        return fmb_errorf (error,
                           "not an https URL (the broker's TCP listener is TLS only)");
    return cfg_check_url (value, error);
}

/* One https URL, or an ordered comma-separated list of them (an active
 * broker and its standbys), rewritten as "URL,URL" without blanks or
 * trailing slashes. */
int cfg_check_https_urls (char *value, struct fmb_error *error)
{
    char out[FMB_CFG_PATH_MAX] = "", one[FMB_CFG_PATH_MAX];
    unsigned n = 0;
    if (!value[0])
        return 0;
    for (const char *p = value;; p++) {
        size_t len = strcspn (p, ",");
        while (len && isspace ((unsigned char)*p))
            p++, len--;
        while (len && isspace ((unsigned char)p[len - 1]))
            len--;
        if (len == 0)
            return fmb_errorf (error, "an empty URL in the list");
        if (++n > FMB_BROKER_URLS_MAX)
            return fmb_errorf (error, "more than %d URLs", FMB_BROKER_URLS_MAX);
        memcpy (one, p, len);
        one[len] = '\0';
        if (cfg_check_https_url (one, error) < 0) /* name the culprit in a list */
            return strchr (value, ',') ? fmb_error_prefix (error, "%s", one) : -1;
        size_t used = strlen (out);
        int w =
            snprintf (out + used, sizeof (out) - used, "%s%s", used ? "," : "", one);
        if (w < 0 || (size_t)w >= sizeof (out) - used)
            return fmb_errorf (error, "the list is too long");
        p = strchr (p, ',');
        if (!p)
            break;
    }
    strcpy (value, out);
    return 0;
}

int cfg_check_url (char *value, struct fmb_error *error)
{
    if (value[0] == '\0')
        return 0;
    const char *host;
    if (strncmp (value, "http://", 7) == 0)
        host = value + 7;
    else if (strncmp (value, "https://", 8) == 0)
        host = value + 8;
    else
        return fmb_errorf (error, "not an http(s) URL");
    if (*host == '\0' || *host == '/')
        return fmb_errorf (error, "URL has no host");
    /* Credentials in the URL would be shown wherever the URL is (status,
     * logs, events): the FM's go in auth_dir, a broker's token in a file. */
    if (memchr (host, '@', strcspn (host, "/")))
        return fmb_errorf (error,
                           "URL must not carry credentials (a user@ part): use "
                           "[fabric_manager] auth and auth_dir, or a token file");
    for (const char *p = value; *p; p++)
        if (isspace ((unsigned char)*p) || *p == '?' || *p == '#')
            return fmb_errorf (error, "URL must not contain spaces, '?' or '#'");
    /* FM paths are appended to the base URL: drop trailing slashes so
     * "https://fm/apis/fm/" does not produce "//fabric/...". */
    size_t n = strlen (value);
    while (n > 0 && value[n - 1] == '/')
        value[--n] = '\0';
    return 0;
}

int cfg_check_names (char *value, struct fmb_error *error)
{
    /* Comma-separated user or group names (or numeric ids), spaces ignored:
     * rewrite in place without the spaces. */
    char *out = value;
    for (const char *p = value; *p; p++) {
        if (*p == ' ' || *p == '\t')
            continue;
        if (!isalnum ((unsigned char)*p) && !strchr ("._-,", *p))
            return fmb_errorf (error, "'%c' cannot appear in a user or group name", *p);
        *out++ = *p;
    }
    *out = '\0';
    if (strstr (value, ",,") || value[0] == ',' || (out > value && out[-1] == ','))
        return fmb_errorf (error, "empty name in list");
    return 0;
}

int cfg_check_hostport (char *value, struct fmb_error *error)
{
    if (value[0] == '\0')
        return 0;
    const char *colon = strrchr (value, ':');
    if (!colon || colon == value)
        return fmb_errorf (error, "must be HOST:PORT (IPv6 as [ADDR]:PORT)");
    if (value[0] == '[' && colon[-1] != ']')
        return fmb_errorf (error, "must be HOST:PORT (IPv6 as [ADDR]:PORT)");
    char *end;
    errno = 0;
    unsigned long port = strtoul (colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port > 65535)
        return fmb_errorf (error, "port must be 0..65535");
    /* A listener binds an address: names are not looked up, here or at
     * start, so both refuse them alike. */
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (fmb_parse_hostport (value, &ss, &sslen) < 0)
        return fmb_errorf (error,
                           "HOST must be a numeric IPv4 or [IPv6] address, not a "
                           "host name");
    return 0;
}

int cfg_parse_uint (const char *value,
                    unsigned min,
                    unsigned max,
                    unsigned *out,
                    struct fmb_error *error)
{
    char *end;
    if (!isdigit ((unsigned char)value[0]))
        return fmb_errorf (error, "must be a whole number %u..%u", min, max);
    errno = 0;
    unsigned long v = strtoul (value, &end, 10);
    if (errno || *end || v < min || v > max)
        return fmb_errorf (error, "must be a whole number %u..%u", min, max);
    *out = (unsigned)v;
    return 0;
}

int cfg_vni_list_next (const char **cursor,
                       unsigned *lo,
                       unsigned *hi,
                       struct fmb_error *error)
{
    const char *p = *cursor + strspn (*cursor, " ,");
    if (!*p)
        return 0;
    size_t len = strcspn (p, ",");
    char item[32];
    if (len >= sizeof (item))
        return fmb_errorf (error, "'%.*s' is not a VNI or MIN-MAX", (int)len, p);
    memcpy (item, p, len);
    item[len] = '\0';
    *cursor = p + len;
    char *dash = strchr (item, '-');
    if (dash)
        *dash = '\0';
    struct fmb_error inner;
    if (cfg_parse_uint (item, 1, 65535, lo, &inner) < 0 ||
        cfg_parse_uint (dash ? dash + 1 : item, 1, 65535, hi, &inner) < 0 || *lo > *hi)
        return fmb_errorf (
            error, "'%.*s' is not a VNI or MIN-MAX within 1-65535", (int)len, p);
    return 1;
}

int cfg_check_vni_list (char *value, struct fmb_error *error)
{
    const char *cursor = value;
    unsigned lo, hi;
    int rc;
    while ((rc = cfg_vni_list_next (&cursor, &lo, &hi, error)) > 0)
        ;
    return rc;
}

int cfg_parse_bool (const char *value, bool *out, struct fmb_error *error)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp (value, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp (value, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return fmb_errorf (error, "must be true or false");
}

int fmb_config_parse_tcs (const char *text, unsigned *mask, struct fmb_error *error)
{
    unsigned m = 0;
    char buf[256];
    if (strncasecmp (text, "0x", 2) == 0) { /* a mask, as SLINGSHOT_TCS shows it */
        char *end;
        errno = 0;
        unsigned long v = strtoul (text + 2, &end, 16);
        if (!isxdigit ((unsigned char)text[2]) || *end || errno || v < 1 || v > 0xf)
            return fmb_errorf (error, "a mask of 0x1..0xf or traffic class names");
        *mask = (unsigned)v;
        return 0;
    }
    if (snprintf (buf, sizeof (buf), "%s", text) >= (int)sizeof (buf))
        return fmb_errorf (error, "too long");
    char *save = NULL;
    for (char *tok = strtok_r (buf, ",: ", &save); tok;
         tok = strtok_r (NULL, ",: ", &save)) {
        const char *name = strncasecmp (tok, "TC_", 3) == 0 ? tok + 3 : tok;
        size_t i;
        for (i = 0; i < sizeof (tc_names) / sizeof (tc_names[0]); i++)
            if (strcasecmp (name, tc_names[i].name) == 0)
                break;
        if (i == sizeof (tc_names) / sizeof (tc_names[0]))
            return fmb_errorf (error,
                               "unknown traffic class '%s' (DEDICATED_ACCESS, "
                               "LOW_LATENCY, BULK_DATA, BEST_EFFORT)",
                               tok);
        m |= tc_names[i].bit;
    }
    if (m == 0)
        return fmb_errorf (error, "at least one traffic class is needed");
    *mask = m;
    return 0;
}

void fmb_config_tcs_names (unsigned mask, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof (tc_names) / sizeof (tc_names[0]); i++)
        if ((mask & tc_names[i].bit) && used < len)
            used += (size_t)snprintf (
                out + used, len - used, "%s%s", used ? "," : "", tc_names[i].name);
    if (!out[0])
        snprintf (out, len, "none");
}

int fmb_config_parse_tcs_within (const char *text,
                                 unsigned allowed,
                                 unsigned *mask,
                                 struct fmb_error *error)
{
    unsigned m;
    if (fmb_config_parse_tcs (text, &m, error) < 0)
        return -1;
    if (m & ~allowed) {
        char names[96];
        fmb_config_tcs_names (allowed, names, sizeof (names));
        return fmb_errorf (error, "this cluster allows only %s", names);
    }
    *mask = m;
    return 0;
}

int cfg_parse_cxi_limits (const char *text,
                          struct fmb_cxi_limit out[FMB_CXI_NRSRC],
                          struct fmb_error *error)
{
    struct fmb_cxi_limit lim[FMB_CXI_NRSRC];
    memcpy (lim, cxi_limit_defaults, sizeof (lim));
    char buf[FMB_CFG_LIST_MAX];
    snprintf (buf, sizeof (buf), "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r (buf, ", ", &save); tok;
         tok = strtok_r (NULL, ", ", &save)) {
        char *eq = strchr (tok, '=');
        if (!eq || (strncmp (tok, "def_", 4) && strncmp (tok, "res_", 4) &&
                    strncmp (tok, "max_", 4)))
            return fmb_errorf (
                error, "'%s': expected def_R=N, res_R=N or max_R=N", tok);
        *eq = '\0';
        int r;
        for (r = 0; r < FMB_CXI_NRSRC; r++)
            if (strcmp (tok + 4, fmb_cxi_rsrc_names[r]) == 0)
                break;
        if (r == FMB_CXI_NRSRC)
            return fmb_errorf (error,
                               "'%s': unknown resource (txqs tgqs eqs cts tles "
                               "ptes les acs)",
                               tok);
        unsigned v;
        struct fmb_error inner;
        if (cfg_parse_uint (eq + 1, 0, cxi_limit_defaults[r].max, &v, &inner) < 0)
            return fmb_errorf (error, "%s: %s", tok, inner.text);
        if (tok[0] == 'd')
            lim[r].def = v;
        else if (tok[0] == 'r')
            lim[r].res = v;
        else
            lim[r].max = v;
    }
    for (int r = 0; r < FMB_CXI_NRSRC; r++)
        if (lim[r].res > lim[r].max)
            return fmb_errorf (error,
                               "res_%s (%u) exceeds max_%s (%u)",
                               fmb_cxi_rsrc_names[r],
                               lim[r].res,
                               fmb_cxi_rsrc_names[r],
                               lim[r].max);
    memcpy (out, lim, sizeof (lim));
    return 0;
}

bool fmb_config_list_has (const char *list, const char *name)
{
    size_t n = strlen (name);
    const char *p = list;
    while (*p) {
        const char *end = strchr (p, ',');
        size_t len = end ? (size_t)(end - p) : strlen (p);
        if (len == n && strncmp (p, name, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}
