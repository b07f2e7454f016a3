/* nodeauth.c: see nodeauth.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "fileutil.h"
#include "nodeauth.h"

#define KEY_HEX 64 /* 32 random bytes, as hex text in the file */

struct key {
    bool present;
    char hex[KEY_HEX + 1];
};

struct nodeauth {
    struct key cur;
    struct key prev;
    int64_t prev_until_ms; /* wall ms until which 'prev' is taken */
};

void nodeauth_key_path (const struct fmb_config *cfg, char *buf, size_t len)
{
    if (cfg->node_key_file[0])
        snprintf (buf, len, "%s", cfg->node_key_file);
    else
        snprintf (buf, len, "%s/node.key", cfg->state_dir);
}

static int new_key_text (char *hex, struct fmb_error *error)
{
    unsigned char raw[KEY_HEX / 2];
    if (RAND_bytes (raw, sizeof (raw)) != 1) {
        errno = EIO;
        return fmb_errorf (error, "node key: no random bytes from OpenSSL");
    }
    for (size_t i = 0; i < sizeof (raw); i++)
        snprintf (hex + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero (raw, sizeof (raw));
    return 0;
}

/* A key file: private, exactly 64 hex characters (and a newline). */
static int read_key (const char *path, struct key *k, struct fmb_error *error)
{
    char *text = NULL;
    size_t len = 0;
    if (fmb_check_private_file (path, error) < 0 ||
        fmb_read_file (path, 4096, true, &text, &len, error) < 0)
        return -1;
    int rc = 0;
    if (len != KEY_HEX || strspn (text, "0123456789abcdefABCDEF") != KEY_HEX) {
        errno = EINVAL;
        rc = fmb_errorf (error, "%s: expected 64 hexadecimal characters", path);
    } else {
        memcpy (k->hex, text, KEY_HEX + 1);
        k->present = true;
    }
    explicit_bzero (text, len);
    free (text);
    return rc;
}

static int write_key (const char *path, uid_t owner, struct fmb_error *error)
{
    char text[KEY_HEX + 2];
    if (new_key_text (text, error) < 0)
        return -1;
    text[KEY_HEX] = '\n';
    text[KEY_HEX + 1] = '\0';
    int rc = fmb_write_file_atomic_owned (path, 0600, owner, text, KEY_HEX + 1, error);
    explicit_bzero (text, sizeof (text));
    return rc;
}

int nodeauth_open (const struct fmb_config *cfg,
                   bool may_create,
                   struct nodeauth **ret,
                   struct fmb_error *error)
{
    char path[FMB_CFG_PATH_MAX + 16], prev[FMB_CFG_PATH_MAX + 32];
    struct stat st;
    nodeauth_key_path (cfg, path, sizeof (path));
    if (may_create && stat (path, &st) < 0 && errno == ENOENT &&
        write_key (path, (uid_t)-1, error) < 0)
        return fmb_error_prefix (error, "[api] node_key_file");
    struct nodeauth *na = calloc (1, sizeof (*na));
    if (!na)
        return fmb_errorf (error, "out of memory");
    if (read_key (path, &na->cur, error) < 0 || stat (path, &st) < 0) {
        fmb_error_prefix (error, "[api] node_key_file");
        goto error;
    }
    /* the rotation's time is the new key's: the previous one is taken for
     * the grace from then */
    na->prev_until_ms =
        (int64_t)st.st_mtime * 1000 + (int64_t)cfg->node_key_grace_s * 1000;
    snprintf (prev, sizeof (prev), "%s.previous", path);
    if (access (prev, F_OK) == 0 && read_key (prev, &na->prev, error) < 0) {
        fmb_error_prefix (error, "[api] node_key_file (previous key)");
        goto error;
    }
    *ret = na;
    return 0;
error:
    nodeauth_destroy (na);
    return -1;
}

void nodeauth_destroy (struct nodeauth *na)
{
    if (na) {
        explicit_bzero (na, sizeof (*na));
        free (na);
    }
}

static void mac_hex (const struct key *k, const char *node, char *out)
{
    char msg[16 + NODE_NAME_MAX + 1];
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    int n = snprintf (msg, sizeof (msg), "fmbroker-node:%s", node);
    HMAC (EVP_sha256 (),
          k->hex,
          KEY_HEX,
          (const unsigned char *)msg,
          (size_t)n,
          mac,
          &maclen);
    for (unsigned i = 0; i < maclen && i < NODEAUTH_HEX_LEN / 2; i++)
        snprintf (out + 2 * i, 3, "%02x", mac[i]);
    out[NODEAUTH_HEX_LEN] = '\0';
    explicit_bzero (mac, sizeof (mac));
}

int nodeauth_token (const struct nodeauth *na,
                    const char *node,
                    char *out,
                    size_t outsize,
                    struct fmb_error *error)
{
    char hex[NODEAUTH_HEX_LEN + 1];
    if (!valid_node_name (node)) {
        errno = EINVAL;
        return fmb_errorf (error,
                           "'%.80s' is not a node name ([A-Za-z0-9._-], 1-64 "
                           "characters, not starting with '.' or '-')",
                           node);
    }
    mac_hex (&na->cur, node, hex);
    int n = snprintf (out, outsize, NODEAUTH_PREFIX "%s:%s", node, hex);
    explicit_bzero (hex, sizeof (hex));
    if (n < 0 || (size_t)n >= outsize) {
        errno = ENAMETOOLONG;
        return fmb_errorf (error, "node token longer than %zu bytes", outsize - 1);
    }
    return 0;
}

static bool mac_matches (const struct key *k, const char *node, const char *given)
{
    char hex[NODEAUTH_HEX_LEN + 1];
    mac_hex (k, node, hex);
    bool ok = CRYPTO_memcmp (hex, given, NODEAUTH_HEX_LEN) == 0;
    explicit_bzero (hex, sizeof (hex));
    return ok;
}

enum nodeauth_result nodeauth_verify (const struct nodeauth *na,
                                      const char *bearer,
                                      const char *revoked,
                                      int64_t now_ms,
                                      char *node)
{
    size_t plen = strlen (NODEAUTH_PREFIX);
    node[0] = '\0';
    if (strncmp (bearer, NODEAUTH_PREFIX, plen) != 0)
        return NODEAUTH_NOT_NODE;
    const char *name = bearer + plen;
    const char *colon = strrchr (name, ':');
    size_t nlen = colon ? (size_t)(colon - name) : 0;
    if (!na || !colon || nlen == 0 || nlen > NODE_NAME_MAX ||
        strlen (colon + 1) != NODEAUTH_HEX_LEN)
        return NODEAUTH_BAD;
    memcpy (node, name, nlen);
    node[nlen] = '\0';
    if (!valid_node_name (node)) {
        node[0] = '\0';
        return NODEAUTH_BAD;
    }
    enum nodeauth_result r = NODEAUTH_BAD;
    if (mac_matches (&na->cur, node, colon + 1))
        r = NODEAUTH_OK;
    else if (na->prev.present && now_ms < na->prev_until_ms &&
             mac_matches (&na->prev, node, colon + 1))
        r = NODEAUTH_OK_PREVIOUS;
    if (r != NODEAUTH_BAD && revoked[0] && fmb_config_list_has (revoked, node))
        r = NODEAUTH_REVOKED;
    return r;
}

int nodeauth_rotate (const struct fmb_config *cfg, struct fmb_error *error)
{
    char path[FMB_CFG_PATH_MAX + 16], prev[FMB_CFG_PATH_MAX + 32];
    struct stat st;
    struct key k = {0};
    nodeauth_key_path (cfg, path, sizeof (path));
    snprintf (prev, sizeof (prev), "%s.previous", path);
    if (stat (path, &st) < 0 && errno == ENOENT) {
        /* the first key, made by root for the service user: owned as the
         * state directory is */
        uid_t owner = stat (cfg->state_dir, &st) == 0 ? st.st_uid : (uid_t)-1;
        if (write_key (path, owner, error) < 0)
            return fmb_error_prefix (error, "[api] node_key_file");
        return 0;
    }
    if (read_key (path, &k, error) < 0 || stat (path, &st) < 0)
        return fmb_error_prefix (error, "[api] node_key_file");
    char text[KEY_HEX + 2];
    memcpy (text, k.hex, KEY_HEX);
    text[KEY_HEX] = '\n';
    text[KEY_HEX + 1] = '\0';
    int rc =
        fmb_write_file_atomic_owned (prev, 0600, st.st_uid, text, KEY_HEX + 1, error);
    explicit_bzero (text, sizeof (text));
    explicit_bzero (&k, sizeof (k));
    if (rc < 0 || write_key (path, st.st_uid, error) < 0)
        return fmb_error_prefix (error, "[api] node_key_file");
    return 0;
}
