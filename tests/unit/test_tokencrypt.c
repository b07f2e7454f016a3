/* test_tokencrypt.c: session tokens at rest: round trip, tamper and
 * misuse detection, and the key file's creation and checks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tokencrypt.h"

struct fx {
    char *dir;
    char *key;
    struct tokencrypt *tc;
};

static int setup (void **state)
{
    struct fx *fx = calloc (1, sizeof (*fx));
    struct fmb_error e;
    bool created;
    fx->dir = tu_mkdtemp ();
    fx->key = tu_path (fx->dir, "token.key");
    assert_int_equal (tokencrypt_open (fx->key, true, &fx->tc, &created, &e), 0);
    assert_true (created);
    *state = fx;
    return 0;
}

static int teardown (void **state)
{
    struct fx *fx = *state;
    tokencrypt_destroy (fx->tc);
    free (fx->key);
    tu_rmtree (fx->dir);
    free (fx);
    return 0;
}

static void key_file_is_created_private_and_reused (void **state)
{
    struct fx *fx = *state;
    struct stat sb;
    struct fmb_error e;
    bool created;
    struct tokencrypt *again;
    unsigned char *blob;
    size_t len;
    char *plain;
    assert_int_equal (stat (fx->key, &sb), 0);
    assert_int_equal (sb.st_mode & 0777, 0600);
    assert_int_equal (sb.st_size, TOKENCRYPT_KEY_LEN);
    assert_int_equal (tokencrypt_seal (fx->tc, "tok", "job1", &blob, &len, &e), 0);
    assert_int_equal (tokencrypt_open (fx->key, true, &again, &created, &e), 0);
    assert_false (created);
    assert_int_equal (tokencrypt_unseal (again, blob, len, "job1", &plain, &e), 0);
    assert_string_equal (plain, "tok");
    tokencrypt_free_plain (plain);
    tokencrypt_destroy (again);
    free (blob);
}

static void round_trip_gives_the_token_back (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    unsigned char *b1, *b2;
    size_t l1, l2;
    char *plain;
    const char *tok = "f1c5b0e0-session-token-0123456789abcdef";
    assert_int_equal (tokencrypt_seal (fx->tc, tok, "c1-42", &b1, &l1, &e), 0);
    assert_int_equal (l1, strlen (tok) + TOKENCRYPT_OVERHEAD);
    assert_null (memmem (b1, l1, tok, strlen (tok))); /* not in the clear */
    assert_int_equal (tokencrypt_seal (fx->tc, tok, "c1-42", &b2, &l2, &e), 0);
    assert_memory_not_equal (b1, b2, l1); /* fresh nonce each time */
    assert_int_equal (tokencrypt_unseal (fx->tc, b1, l1, "c1-42", &plain, &e), 0);
    assert_string_equal (plain, tok);
    tokencrypt_free_plain (plain);
    free (b1);
    free (b2);
}

static void every_altered_byte_is_detected (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    unsigned char *blob;
    size_t len;
    char *plain = NULL;
    assert_int_equal (tokencrypt_seal (fx->tc, "secret-token", "job", &blob, &len, &e),
                      0);
    for (size_t i = 0; i < len; i++) {
        blob[i] ^= 0x01;
        errno = 0;
        assert_int_equal (tokencrypt_unseal (fx->tc, blob, len, "job", &plain, &e), -1);
        assert_int_equal (errno, EBADMSG);
        blob[i] ^= 0x01;
    }
    /* truncated, and bound to another job */
    assert_int_equal (tokencrypt_unseal (fx->tc, blob, len - 1, "job", &plain, &e), -1);
    assert_int_equal (errno, EBADMSG);
    assert_int_equal (tokencrypt_unseal (fx->tc, blob, 5, "job", &plain, &e), -1);
    assert_int_equal (tokencrypt_unseal (fx->tc, blob, len, "job2", &plain, &e), -1);
    assert_int_equal (errno, EBADMSG);
    assert_null (plain);
    free (blob);
}

static void another_key_cannot_decrypt (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    unsigned char *blob;
    size_t len;
    char *plain;
    char *other = tu_path (fx->dir, "other.key");
    struct tokencrypt *tc2;
    assert_int_equal (tokencrypt_open (other, true, &tc2, NULL, &e), 0);
    assert_int_equal (tokencrypt_seal (fx->tc, "t", "j", &blob, &len, &e), 0);
    assert_int_equal (tokencrypt_unseal (tc2, blob, len, "j", &plain, &e), -1);
    assert_int_equal (errno, EBADMSG);
    assert_string_equal (
        e.text, "stored token failed authentication (altered, or another key)");
    tokencrypt_destroy (tc2);
    free (blob);
    free (other);
}

static void bad_key_files_are_refused (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct tokencrypt *tc;
    char *path = tu_path (fx->dir, "bad.key");
    tu_write (path, "0123456789abcdef0123456789abcdef", 0644);
    assert_int_equal (tokencrypt_open (path, true, &tc, NULL, &e), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (e.text, "lets group or others read it"));
    tu_write (path, "short", 0600);
    assert_int_equal (tokencrypt_open (path, true, &tc, NULL, &e), -1);
    assert_non_null (strstr (e.text, "not a token key (5 bytes, expected 32)"));
    free (path);
    path = tu_path (fx->dir, "missing.key");
    assert_int_equal (tokencrypt_open (path, false, &tc, NULL, &e), -1);
    assert_int_equal (errno, ENOENT);
    free (path);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (
            key_file_is_created_private_and_reused, setup, teardown),
        cmocka_unit_test_setup_teardown (
            round_trip_gives_the_token_back, setup, teardown),
        cmocka_unit_test_setup_teardown (
            every_altered_byte_is_detected, setup, teardown),
        cmocka_unit_test_setup_teardown (another_key_cannot_decrypt, setup, teardown),
        cmocka_unit_test_setup_teardown (bad_key_files_are_refused, setup, teardown),
    };
    return cmocka_run_group_tests_name ("tokencrypt", tests, NULL, NULL);
}
