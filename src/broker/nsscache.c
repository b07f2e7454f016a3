/* nsscache.c: see nsscache.h.  Two small tables replaced round-robin:
 * a flood of distinct uids only costs lookups, never memory. */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "nsscache.h"

#define GROUP_SLOTS 256
#define NAME_SLOTS  64

static struct {
    uid_t uid;
    gid_t gid;
    bool member;
    int64_t until;
} groups_cache[GROUP_SLOTS];
static unsigned groups_next;

static struct {
    char name[64];
    uid_t uid;
    bool found;
    int64_t until;
} names_cache[NAME_SLOTS];
static unsigned names_next;

static bool lookup_groups (uid_t uid, gid_t gid, const gid_t *gids, int ngids)
{
    struct passwd *p = getpwuid (uid);
    gid_t list[256];
    int n = 256;
    if (!p || getgrouplist (p->pw_name, gid, list, &n) < 0)
        return false;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ngids; j++)
            if (list[i] == gids[j])
                return true;
    return false;
}

bool nss_in_groups (uid_t uid, gid_t gid, const gid_t *gids, int ngids, int64_t now_ms)
{
    for (unsigned i = 0; i < GROUP_SLOTS; i++)
        if (groups_cache[i].until > now_ms && groups_cache[i].uid == uid &&
            groups_cache[i].gid == gid)
            return groups_cache[i].member;
    bool member = lookup_groups (uid, gid, gids, ngids);
    unsigned slot = groups_next++ % GROUP_SLOTS;
    groups_cache[slot].uid = uid;
    groups_cache[slot].gid = gid;
    groups_cache[slot].member = member;
    groups_cache[slot].until = now_ms + NSS_CACHE_MS;
    return member;
}

bool nss_uid_of (const char *name, uid_t *uid, int64_t now_ms)
{
    if (strlen (name) >= sizeof (names_cache[0].name)) {
        struct passwd *p = getpwnam (name);
        if (p)
            *uid = p->pw_uid;
        return p != NULL;
    }
    for (unsigned i = 0; i < NAME_SLOTS; i++)
        if (names_cache[i].until > now_ms && strcmp (names_cache[i].name, name) == 0) {
            *uid = names_cache[i].uid;
            return names_cache[i].found;
        }
    struct passwd *p = getpwnam (name);
    unsigned slot = names_next++ % NAME_SLOTS;
    snprintf (names_cache[slot].name, sizeof (names_cache[slot].name), "%s", name);
    names_cache[slot].found = p != NULL;
    names_cache[slot].uid = p ? p->pw_uid : 0;
    names_cache[slot].until = now_ms + NSS_CACHE_MS;
    *uid = names_cache[slot].uid;
    return names_cache[slot].found;
}

void nss_cache_flush (void)
{
    memset (groups_cache, 0, sizeof (groups_cache));
    memset (names_cache, 0, sizeof (names_cache));
}
