/* roles.c: who may do what (roles.h). */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpreq.h"
#include "log.h"
#include "monotime.h"
#include "nsscache.h"
#include "roles.h"

struct roles {
    uid_t rm_uids[MAX_ROLE_IDS];
    int n_rm;
    uid_t admin_uids[MAX_ROLE_IDS];
    int n_admin;
    gid_t admin_gids[MAX_ROLE_IDS];
    int n_admin_gids;
};

struct roles *roles_create (void)
{
    return calloc (1, sizeof (struct roles));
}

void roles_destroy (struct roles *r)
{
    free (r);
}

/* A name missing from the built-in default list (e.g. 'flux' on a Slurm
 * site) is expected and logged at info level (a 'slurm' from a directory
 * that did not answer at start is not: every RUN from it is then a 403
 * until a reload, and this line says why); one the site wrote itself is
 * a warning. */
static int resolve_list (
    const char *list, bool groups, unsigned *ids, int *n, const char *key)
{
    int missing_level =
        strcmp (key, "rm_users") == 0 && strcmp (list, FMB_RM_USERS_DEFAULT) == 0
            ? LOG_INFO
            : LOG_WARNING;
    char buf[FMB_CFG_LIST_MAX];
    char *save = NULL;
    snprintf (buf, sizeof (buf), "%s", list);
    *n = 0;
    for (char *name = strtok_r (buf, ",", &save); name;
         name = strtok_r (NULL, ",", &save)) {
        char *end;
        unsigned long v = strtoul (name, &end, 10);
        if (*end == '\0') {
            ids[(*n)++] = (unsigned)v;
        } else if (groups) {
            struct group *g = getgrnam (name);
            if (g)
                ids[(*n)++] = g->gr_gid;
            else
                fmb_log (missing_level, "[api] %s: no group '%s', ignoring", key, name);
        } else {
            struct passwd *p = getpwnam (name);
            if (p)
                ids[(*n)++] = p->pw_uid;
            else
                fmb_log (missing_level, "[api] %s: no user '%s', ignoring", key, name);
        }
        if (*n == MAX_ROLE_IDS)
            break;
    }
    return 0;
}

int roles_resolve (struct roles *r, const struct fmb_config *cfg)
{
    resolve_list (cfg->rm_users, false, (unsigned *)r->rm_uids, &r->n_rm, "rm_users");
    resolve_list (
        cfg->admin_users, false, (unsigned *)r->admin_uids, &r->n_admin, "admin_users");
    resolve_list (cfg->admin_groups,
                  true,
                  (unsigned *)r->admin_gids,
                  &r->n_admin_gids,
                  "admin_groups");
    return 0;
}

static bool in_groups (struct roles *r, uid_t uid, gid_t gid)
{
    for (int i = 0; i < r->n_admin_gids; i++)
        if (r->admin_gids[i] == gid)
            return true;
    if (r->n_admin_gids == 0)
        return false;
    /* asked at every accept: the name service (maybe LDAP) is asked at
     * most once per NSS_CACHE_MS and user */
    return nss_in_groups (uid, gid, r->admin_gids, r->n_admin_gids, fmb_monotime_ms ());
}

unsigned roles_of (struct roles *r, uid_t uid, gid_t gid)
{
    unsigned roles = 0;
    for (int i = 0; i < r->n_rm; i++)
        if (r->rm_uids[i] == uid)
            roles |= ROLE_RM;
    for (int i = 0; i < r->n_admin; i++)
        if (r->admin_uids[i] == uid)
            roles |= ROLE_ADMIN;
    if (!(roles & ROLE_ADMIN) && in_groups (r, uid, gid))
        roles |= ROLE_ADMIN;
    return roles;
}
