/* roles.h: the roles of local callers, from [api] rm_users, admin_users
 * and admin_groups (names resolved at start and reload; group
 * membership asked of the name service through nsscache). */
#ifndef FMB_ROLES_H
#define FMB_ROLES_H

#include <sys/types.h>

#include "config.h"

#define MAX_ROLE_IDS 64

struct roles;

struct roles *roles_create (void);
void roles_destroy (struct roles *r);
/* (Re)read the lists; a name that does not resolve is logged and left out. */
int roles_resolve (struct roles *r, const struct fmb_config *cfg);
/* ROLE_RM | ROLE_ADMIN (httpreq.h) held by a local caller. */
unsigned roles_of (struct roles *r, uid_t uid, gid_t gid);

#endif
