/* test_peers.c: the Unix socket's per-uid connection limits. */
#include "peers.h"
#include "testutil.h"

static void plain_users_meet_their_cap_and_the_shared_part (void **state)
{
    (void)state;
    struct peer_limits lim = {.max_total = 10, .per_user = 3, .reserved = 4};
    struct peers *p = peers_create (&lim);
    const char *why = NULL;
    assert_non_null (p);
    for (int i = 0; i < 3; i++)
        assert_true (peers_admit (p, 1000, false, &why));
    assert_false (peers_admit (p, 1000, false, &why));
    assert_string_equal (why, "max_connections_per_user");
    assert_int_equal (peers_count (p, 1000), 3);
    /* six plain slots in all (ten less four reserved) */
    for (int i = 0; i < 3; i++)
        assert_true (peers_admit (p, 1001, false, &why));
    assert_false (peers_admit (p, 1002, false, &why));
    assert_string_equal (why, "max_connections less reserved_connections");
    /* the reserve is the privileged users' */
    for (int i = 0; i < 4; i++)
        assert_true (peers_admit (p, 0, true, &why));
    assert_false (peers_admit (p, 0, true, &why));
    assert_string_equal (why, "max_connections");
    /* a closed connection frees its slot for its kind */
    peers_release (p, 1000, false);
    assert_int_equal (peers_count (p, 1000), 2);
    assert_true (peers_admit (p, 1002, false, &why));
    assert_false (peers_admit (p, 0, true, &why));
    peers_release (p, 0, true);
    assert_true (peers_admit (p, 0, true, &why));
    peers_destroy (p);
}

static void uids_come_and_go (void **state)
{
    (void)state;
    struct peer_limits lim = {.max_total = 4, .per_user = 4, .reserved = 0};
    struct peers *p = peers_create (&lim);
    for (int round = 0; round < 100; round++) {
        for (uid_t u = 0; u < 4; u++)
            assert_true (peers_admit (p, 2000 + u + (uid_t)round, false, NULL));
        assert_false (peers_admit (p, 1, false, NULL));
        for (uid_t u = 0; u < 4; u++)
            peers_release (p, 2000 + u + (uid_t)round, false);
    }
    peers_release (p, 12345, false); /* unknown: ignored */
    assert_true (peers_admit (p, 1, false, NULL));
    peers_destroy (p);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (plain_users_meet_their_cap_and_the_shared_part),
        cmocka_unit_test (uids_come_and_go),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
