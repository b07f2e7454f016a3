/* nodeauth.h: compute nodes' own credentials, without a secret per node
 * kept by the broker.
 *
 * A node's token is "node:NAME:HEX", HEX = hex (HMAC-SHA256 (node key,
 * "fmbroker-node:" NAME)).  The node key (64 hex characters, 0600, the
 * service user's) is [api] node_key_file, or STATE_DIR/node.key, made on
 * the first start with a TCP listener.  `fmbrokerd --node-token NAME`
 * prints a node's token; `fmbrokerd --rotate-node-key` keeps the old key
 * as NODE_KEY.previous and writes a new one: after a reload, tokens under
 * the previous key are still taken for [api] node_key_grace_s after the
 * rotation (the new key's mtime), logged.  [api] revoked_nodes names
 * nodes whose tokens are refused whatever the key.
 */
#ifndef FMB_NODEAUTH_H
#define FMB_NODEAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "error.h"
#include "validate.h"

#define NODEAUTH_PREFIX  "node:"
#define NODEAUTH_HEX_LEN 64
#define NODEAUTH_TOKEN_MAX \
    (sizeof (NODEAUTH_PREFIX) + NODE_NAME_MAX + 1 + NODEAUTH_HEX_LEN + 1)

struct nodeauth;

enum nodeauth_result {
    NODEAUTH_NOT_NODE,    /* not a node token: some other credential */
    NODEAUTH_OK,          /* under the current key */
    NODEAUTH_OK_PREVIOUS, /* under the previous key, within the grace */
    NODEAUTH_BAD,         /* a node token that does not verify */
    NODEAUTH_REVOKED,     /* verifies, but the node is in revoked_nodes */
};

/* The node key's path: [api] node_key_file or STATE_DIR/node.key. */
void nodeauth_key_path (const struct fmb_config *cfg, char *buf, size_t len);

/* Read the node key (and the previous one, if its file exists); with
 * 'may_create', a missing key is made (0600).  -1 with 'error' naming the
 * file. */
int nodeauth_open (const struct fmb_config *cfg,
                   bool may_create,
                   struct nodeauth **ret,
                   struct fmb_error *error);
void nodeauth_destroy (struct nodeauth *na);

/* "node:NAME:HEX" for 'node' under the current key. */
int nodeauth_token (const struct nodeauth *na,
                    const char *node,
                    char *out,
                    size_t outsize,
                    struct fmb_error *error);

/* Check a bearer token at wall time 'now_ms' against 'revoked' (a comma
 * list); the node's name goes to 'node' (NODE_NAME_MAX + 1 bytes) for
 * every result but NODEAUTH_NOT_NODE (and BAD of a malformed token).
 * Constant time in the HMAC comparison. */
enum nodeauth_result nodeauth_verify (const struct nodeauth *na,
                                      const char *bearer,
                                      const char *revoked,
                                      int64_t now_ms,
                                      char *node);

/* Replace the node key: the current one becomes NODE_KEY.previous, a new
 * one is written in its place, both owned as the current one was. */
int nodeauth_rotate (const struct fmb_config *cfg, struct fmb_error *error);

#endif
