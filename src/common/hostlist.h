/* hostlist.h: expand Slurm/Flux (RFC 29) compressed host lists, e.g.
 * "nid[001-003,7],login1" -> nid001 nid002 nid003 nid7 login1.  Zero
 * padding follows the first number of each range; several bracket groups
 * in one name are expanded as a product. */
#ifndef FMB_HOSTLIST_H
#define FMB_HOSTLIST_H

#include <jansson.h>

#include "error.h"

#define HOSTLIST_MAX 65536 /* names produced at most */

/* Append the names to the JSON array 'out'. */
int hostlist_expand (const char *text, json_t *out, struct fmb_error *error);

#endif
