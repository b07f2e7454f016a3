/* config_rules.h: the rules that involve several keys (timeout >= the
 * reservation timeout, a pool that holds max_per_job, TLS files set
 * together, ...), checked once every key has its final value.  Each
 * problem goes to the load's context (config_ctx.h), all of them, not
 * only the first.  Inside src/common only. */
#ifndef FMB_COMMON_CONFIG_RULES_H
#define FMB_COMMON_CONFIG_RULES_H

#include "config_ctx.h"

/* The rules between a client's own keys (all a client checks). */
int cfg_client_validate (struct parse_ctx *ctx);

/* Every rule (the broker's configuration); -1 if one failed. */
int cfg_validate (struct parse_ctx *ctx);

#endif
