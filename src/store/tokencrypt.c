/* tokencrypt.c: see tokencrypt.h. */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "fileutil.h"
#include "tokencrypt.h"

#define SEAL_VERSION 1

struct tokencrypt {
    unsigned char key[TOKENCRYPT_KEY_LEN];
};

static struct tokencrypt *tc_alloc (void)
{
    /* A page of its own so it can be left out of core dumps. */
    void *p = mmap (NULL,
                    sizeof (struct tokencrypt),
                    PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS,
                    -1,
                    0);
    if (p == MAP_FAILED)
        return NULL;
    (void)madvise (p, sizeof (struct tokencrypt), MADV_DONTDUMP);
    return p;
}

void tokencrypt_destroy (struct tokencrypt *tc)
{
    if (tc) {
        int saved = errno;
        explicit_bzero (tc->key, sizeof (tc->key));
        munmap (tc, sizeof (*tc));
        errno = saved;
    }
}

static int read_key (int fd,
                     const char *path,
                     struct tokencrypt *tc,
                     struct fmb_error *error)
{
    if (fmb_check_private_fd (fd, path, error) < 0)
        return -1;
    unsigned char buf[TOKENCRYPT_KEY_LEN + 1];
    ssize_t n = read (fd, buf, sizeof (buf));
    if (n < 0)
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    if (n != TOKENCRYPT_KEY_LEN) {
        explicit_bzero (buf, sizeof (buf));
        errno = EINVAL;
        return fmb_errorf (error,
                           "%s: not a token key (%zd bytes, expected %d)",
                           path,
                           n,
                           TOKENCRYPT_KEY_LEN);
    }
    memcpy (tc->key, buf, TOKENCRYPT_KEY_LEN);
    explicit_bzero (buf, sizeof (buf));
    return 0;
}

static int create_key (const char *path, struct tokencrypt *tc, struct fmb_error *error)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1; /* caller looks at errno (EEXIST: raced with another) */
    if (RAND_bytes (tc->key, sizeof (tc->key)) != 1) {
        close (fd);
        unlink (path);
        errno = EIO;
        return fmb_errorf (error, "%s: no random bytes for a key", path);
    }
    if (write (fd, tc->key, sizeof (tc->key)) != (ssize_t)sizeof (tc->key) ||
        fsync (fd) < 0) {
        int saved = errno ? errno : EIO;
        close (fd);
        unlink (path);
        errno = saved;
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    }
    close (fd);
    return 0;
}

int tokencrypt_open (const char *path,
                     bool may_create,
                     struct tokencrypt **ret,
                     bool *ret_created,
                     struct fmb_error *error)
{
    struct tokencrypt *tc = tc_alloc ();
    bool created = false;
    if (!tc)
        return fmb_errorf (error, "token key: out of memory");
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && may_create) {
        if (create_key (path, tc, error) == 0)
            created = true;
        else if (errno == EEXIST)
            fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        else {
            if (errno != EIO)
                fmb_errorf (error, "%s: %s", path, strerror (errno));
            goto error;
        }
    }
    if (!created) {
        if (fd < 0) {
            fmb_errorf (error, "%s: %s", path, strerror (errno));
            goto error;
        }
        int rc = read_key (fd, path, tc, error);
        int saved = errno;
        close (fd);
        errno = saved;
        if (rc < 0)
            goto error;
    }
    if (ret_created)
        *ret_created = created;
    *ret = tc;
    return 0;
error:
    tokencrypt_destroy (tc);
    return -1;
}

int tokencrypt_seal (struct tokencrypt *tc,
                     const char *plain,
                     const char *aad,
                     unsigned char **ret,
                     size_t *ret_len,
                     struct fmb_error *error)
{
    size_t plen = strlen (plain);
    if (plen > TOKENCRYPT_PLAIN_MAX) {
        errno = EMSGSIZE;
        return fmb_errorf (error, "token longer than %d bytes", TOKENCRYPT_PLAIN_MAX);
    }
    size_t len = TOKENCRYPT_OVERHEAD + plen;
    unsigned char *out = malloc (len);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int n;
    if (!out || !ctx)
        goto fail;
    out[0] = SEAL_VERSION;
    unsigned char *nonce = out + 1;
    unsigned char *ct = nonce + TOKENCRYPT_NONCE_LEN;
    unsigned char *tag = ct + plen;
    if (RAND_bytes (nonce, TOKENCRYPT_NONCE_LEN) != 1 ||
        EVP_EncryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_IVLEN, TOKENCRYPT_NONCE_LEN, NULL) !=
            1 ||
        EVP_EncryptInit_ex (ctx, NULL, NULL, tc->key, nonce) != 1 ||
        EVP_EncryptUpdate (
            ctx, NULL, &n, (const unsigned char *)aad, (int)strlen (aad)) != 1 ||
        EVP_EncryptUpdate (ctx, ct, &n, (const unsigned char *)plain, (int)plen) != 1 ||
        EVP_EncryptFinal_ex (ctx, ct + n, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_GET_TAG, TOKENCRYPT_TAG_LEN, tag) != 1)
        goto fail;
    EVP_CIPHER_CTX_free (ctx);
    *ret = out;
    *ret_len = len;
    return 0;
fail:
    EVP_CIPHER_CTX_free (ctx);
    free (out);
    errno = EIO;
    return fmb_errorf (error, "token encryption failed");
}

int tokencrypt_unseal (struct tokencrypt *tc,
                       const unsigned char *blob,
                       size_t len,
                       const char *aad,
                       char **ret,
                       struct fmb_error *error)
{
    if (len < TOKENCRYPT_OVERHEAD || blob[0] != SEAL_VERSION ||
        len - TOKENCRYPT_OVERHEAD > TOKENCRYPT_PLAIN_MAX) {
        errno = EBADMSG;
        return fmb_errorf (error, "stored token is damaged (bad length or version)");
    }
    size_t plen = len - TOKENCRYPT_OVERHEAD;
    const unsigned char *nonce = blob + 1;
    const unsigned char *ct = nonce + TOKENCRYPT_NONCE_LEN;
    const unsigned char *tag = ct + plen;
    char *out = malloc (plen + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int n, n2;
    if (!out || !ctx) {
        EVP_CIPHER_CTX_free (ctx);
        free (out);
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    if (EVP_DecryptInit_ex (ctx, EVP_aes_256_gcm (), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl (ctx, EVP_CTRL_GCM_SET_IVLEN, TOKENCRYPT_NONCE_LEN, NULL) !=
            1 ||
        EVP_DecryptInit_ex (ctx, NULL, NULL, tc->key, nonce) != 1 ||
        EVP_DecryptUpdate (
            ctx, NULL, &n, (const unsigned char *)aad, (int)strlen (aad)) != 1 ||
        EVP_DecryptUpdate (ctx, (unsigned char *)out, &n, ct, (int)plen) != 1 ||
        EVP_CIPHER_CTX_ctrl (
            ctx, EVP_CTRL_GCM_SET_TAG, TOKENCRYPT_TAG_LEN, (void *)tag) != 1 ||
        EVP_DecryptFinal_ex (ctx, (unsigned char *)out + n, &n2) != 1) {
        EVP_CIPHER_CTX_free (ctx);
        explicit_bzero (out, plen + 1);
        free (out);
        errno = EBADMSG;
        return fmb_errorf (error,
                           "stored token failed authentication (altered, or "
                           "another key)");
    }
    EVP_CIPHER_CTX_free (ctx);
    out[plen] = '\0';
    if (strlen (out) != plen) {
        tokencrypt_free_plain (out);
        errno = EBADMSG;
        return fmb_errorf (error, "stored token holds a NUL byte");
    }
    *ret = out;
    return 0;
}

void tokencrypt_free_plain (char *plain)
{
    if (plain) {
        explicit_bzero (plain, strlen (plain));
        free (plain);
    }
}
