/* peers.h: the Unix socket's connections counted per peer uid, so that no
 * local user can take the whole server (promise 7).
 *
 * A connection is admitted at accept, before libmicrohttpd sees it, from
 * the uid SO_PEERCRED gives.  Privileged peers (rm and admin users) only
 * meet the total; everyone else meets a per-uid cap and, all together, the
 * total less the slots reserved for the privileged.
 */
#ifndef FMB_PEERS_H
#define FMB_PEERS_H

#include <stdbool.h>
#include <sys/types.h>

struct peer_limits {
    unsigned max_total; /* every connection of the socket */
    unsigned per_user;  /* one unprivileged uid */
    unsigned reserved;  /* kept for privileged uids */
};

struct peers;

/* NULL when out of memory. */
struct peers *peers_create (const struct peer_limits *lim);
void peers_destroy (struct peers *p);

/* Count a new connection of 'uid'; false (and nothing counted) when a
 * limit is reached, with the limit named in 'why'. */
bool peers_admit (struct peers *p, uid_t uid, bool privileged, const char **why);
/* Forget one connection admitted for the same uid and privilege. */
void peers_release (struct peers *p, uid_t uid, bool privileged);
/* Connections now open for 'uid' (tests, metrics). */
unsigned peers_count (const struct peers *p, uid_t uid);

#endif
