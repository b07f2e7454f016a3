/* tokencrypt.h: session tokens encrypted at rest with AES-256-GCM.
 *
 * The 32-byte key lives in a file of its own, created 0600 on first start
 * and refused if group or others can read it.  A sealed token is
 *   version (1 byte, 1) | nonce (12) | ciphertext | tag (16)
 * and is bound to its job id as additional authenticated data, so a token
 * copied onto another job's row fails to decrypt as surely as a tampered one.
 * The key is kept in memory excluded from core dumps.
 */
#ifndef FMB_TOKENCRYPT_H
#define FMB_TOKENCRYPT_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define TOKENCRYPT_KEY_LEN   32
#define TOKENCRYPT_NONCE_LEN 12
#define TOKENCRYPT_TAG_LEN   16
#define TOKENCRYPT_OVERHEAD  (1 + TOKENCRYPT_NONCE_LEN + TOKENCRYPT_TAG_LEN)
#define TOKENCRYPT_PLAIN_MAX 4096 /* FM session tokens are far shorter */

struct tokencrypt;

/* Load the key at 'path'; if it does not exist and 'may_create', make one.
 * *ret_created tells whether it was made now (may be NULL). */
int tokencrypt_open (const char *path,
                     bool may_create,
                     struct tokencrypt **ret,
                     bool *ret_created,
                     struct fmb_error *error);
void tokencrypt_destroy (struct tokencrypt *tc);

/* Encrypt 'plain' bound to 'aad'.  *ret is malloc'd (caller frees). */
int tokencrypt_seal (struct tokencrypt *tc,
                     const char *plain,
                     const char *aad,
                     unsigned char **ret,
                     size_t *ret_len,
                     struct fmb_error *error);

/* Decrypt; EBADMSG if the blob was altered, truncated or belongs to
 * another 'aad' or key.  *ret is a malloc'd NUL-terminated string. */
int tokencrypt_unseal (struct tokencrypt *tc,
                       const unsigned char *blob,
                       size_t len,
                       const char *aad,
                       char **ret,
                       struct fmb_error *error);

/* Wipe and free a plaintext token (NULL is fine). */
void tokencrypt_free_plain (char *plain);

#endif
