/* nsscache.h: NSS answers (which may come from LDAP) kept for a short
 * while, so that the broker's single loop thread does not ask the name
 * service at every accept or listing.  A change in the directory is seen
 * within NSS_CACHE_MS. */
#ifndef FMB_NSSCACHE_H
#define FMB_NSSCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define NSS_CACHE_MS 30000

/* Is 'uid' (primary group 'gid') a member of any of 'gids'?  The answer
 * of getpwuid + getgrouplist, cached per (uid, gid). */
bool nss_in_groups (uid_t uid, gid_t gid, const gid_t *gids, int ngids, int64_t now_ms);

/* getpwnam's uid for 'name'; false if there is no such user.  Cached,
 * misses too. */
bool nss_uid_of (const char *name, uid_t *uid, int64_t now_ms);

/* Forget every answer: membership is cached for the admin groups asked
 * about, so a reload that changes them must not see old answers. */
void nss_cache_flush (void);

#endif
