/* Tests for the distributed-run helpers that do not need MPI: the streaming hash, the start-up
 * handshake (over the thread transport: disagreements named, start-up failures reported once),
 * and sharded-checkpoint files (manifest round trip, malformed manifests, damaged shards). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "zbpp/checkpoint_sharded.h"
#include "zbpp/handshake.h"
#include "zbpp/transport.h"

/* ---- hash ---- */

static void hash_is_independent_of_chunking(void **state)
{
    (void)state;
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (unsigned char)(i * 37 + 11);
    uint64_t whole = zb_hash_bytes(ZB_HASH_SEED, buf, sizeof buf);
    static const size_t cuts[] = {1, 3, 7, 8, 9, 13, 64, 999};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        zb_hasher_t hs;
        zb_hasher_init(&hs, ZB_HASH_SEED);
        for (size_t off = 0; off < sizeof buf; off += cuts[c]) {
            size_t n = sizeof buf - off < cuts[c] ? sizeof buf - off : cuts[c];
            zb_hasher_add(&hs, buf + off, n);
        }
        assert_true(zb_hasher_end(&hs) == whole);
    }
    /* any changed byte or length changes it */
    buf[500] ^= 1;
    assert_true(zb_hash_bytes(ZB_HASH_SEED, buf, sizeof buf) != whole);
    buf[500] ^= 1;
    assert_true(zb_hash_bytes(ZB_HASH_SEED, buf, sizeof buf - 1) != whole);
    assert_true(zb_build_id() != 0 && zb_build_id() == zb_build_id());
}

/* ---- handshake over the thread transport ---- */

typedef struct {
    zb_hs_item_t items[3];
    zb_status_t local;
    const char *local_msg;
    zb_status_t got;
    char msg[512];
} hs_arg_t;

static zb_status_t hs_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    hs_arg_t *a = arg;
    zb_err_t e;
    zb_err_clear(&e);
    if (a->local != ZB_OK)
        zb_err_set(&e, a->local, "%s", a->local_msg);
    a->got = zb_handshake(t, a->items, 3, a->local, &e);
    snprintf(a->msg, sizeof a->msg, "%s", e.msg);
    (void)err;
    return ZB_OK; /* the test inspects every rank's result */
}

static void run_world(hs_arg_t *args, int P)
{
    zb_thread_world_t *w;
    zb_err_t err;
    assert_int_equal(zb_thread_world_new(P, 16, 10, &w, &err), ZB_OK);
    void *ptrs[8];
    for (int r = 0; r < P; r++)
        ptrs[r] = &args[r];
    assert_int_equal(zb_thread_world_run(w, hs_rank, ptrs, 0, NULL, &err), ZB_OK);
    zb_thread_world_free(w);
}

static void fill(hs_arg_t *a, uint64_t lr, uint64_t sched)
{
    memset(a, 0, sizeof *a);
    a->items[0] = (zb_hs_item_t){"binary", 42};
    a->items[1] = (zb_hs_item_t){"schedule", sched};
    a->items[2] = (zb_hs_item_t){"lr", lr};
}

static void handshake_agrees(void **state)
{
    (void)state;
    hs_arg_t a[3];
    for (int r = 0; r < 3; r++)
        fill(&a[r], 1, 2);
    run_world(a, 3);
    for (int r = 0; r < 3; r++)
        assert_int_equal(a[r].got, ZB_OK);
}

static void handshake_names_disagreements(void **state)
{
    (void)state;
    hs_arg_t a[3];
    fill(&a[0], 1, 2);
    fill(&a[1], 9, 8); /* schedule and lr differ */
    fill(&a[2], 1, 2);
    a[2].items[0].hash = 43; /* binary differs */
    run_world(a, 3);
    assert_int_equal(a[0].got, ZB_EMISMATCH); /* rank 0 is the one that reports */
    assert_non_null(strstr(a[0].msg, "rank 1 disagrees on: schedule, lr"));
    assert_non_null(strstr(a[0].msg, "rank 2 disagrees on: binary"));
    assert_int_equal(a[1].got, ZB_EABORT);
    assert_int_equal(a[2].got, ZB_EABORT);
}

static void handshake_reports_startup_failures_once(void **state)
{
    (void)state;
    hs_arg_t a[4];
    for (int r = 0; r < 4; r++)
        fill(&a[r], 1, 2);
    a[1].local = a[3].local = ZB_EIO;
    a[1].local_msg = a[3].local_msg = "cannot open data.bin";
    a[2].local = ZB_EINVAL;
    a[2].local_msg = "bad flag";
    run_world(a, 4);
    assert_int_equal(a[1].got, ZB_EIO); /* lowest rank with that message: prints it */
    assert_string_equal(a[1].msg, "cannot open data.bin");
    assert_int_equal(a[3].got, ZB_EABORT); /* same message as rank 1: stays quiet */
    assert_int_equal(a[2].got, ZB_EINVAL);
    assert_int_equal(a[0].got, ZB_EABORT); /* fine itself, learns of the others */
    assert_non_null(strstr(a[0].msg, "rank 1 and 2 other ranks failed during start-up"));
}

/* ---- sharded checkpoint files ---- */

static char dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zbpp_test_ckpt.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void manifest_round_trip_and_damage(void **state)
{
    (void)state;
    zb_ckpt_manifest_t m, back;
    zb_err_t err;
    assert_int_equal(zb_ckpt_manifest_alloc(&m, 2, 4, &err), ZB_OK);
    m.step = 7, m.skipped = 1, m.chunks = 2;
    snprintf(m.schedule, sizeof m.schedule, "zb-v");
    int sr[4] = {0, 1, 1, 0}, first[5] = {0, 1, 2, 3, 4};
    memcpy(m.stage_rank, sr, sizeof sr);
    memcpy(m.first, first, sizeof first);
    zb_train_config_defaults(&m.cfg);
    m.cfg.model = (zb_gpt2_config_t){16, 257, 384, 4, 2, 32};
    m.cfg.seq = 16; /* a run never has sequences longer than its model's maximum */
    m.cfg.adamw.lr = 1.2345e-4f;
    m.param_count = 1000;
    m.data_fp = 0xDEADBEEFCAFEull;
    snprintf(m.shard[0].file, sizeof m.shard[0].file, "x.7-1.rank0");
    snprintf(m.shard[1].file, sizeof m.shard[1].file, "x.7-1.rank1");
    m.shard[1].checksum = 0xFFFFFFFFFFFFFFFFull;
    char path[128];
    snprintf(path, sizeof path, "%s/x", dir);
    assert_int_equal(zb_ckpt_manifest_write(path, &m, &err), ZB_OK);
    assert_true(zb_ckpt_is_sharded(path));
    assert_int_equal(zb_ckpt_manifest_read(path, &back, &err), ZB_OK);
    assert_int_equal(back.step, 7);
    assert_int_equal(back.skipped, 1);
    assert_string_equal(back.schedule, "zb-v");
    assert_memory_equal(back.stage_rank, sr, sizeof sr);
    assert_true(back.cfg.adamw.lr == m.cfg.adamw.lr); /* exact: stored as bits */
    assert_true(back.data_fp == m.data_fp);
    assert_true(back.shard[1].checksum == m.shard[1].checksum);
    assert_true(back.hash == m.hash);
    zb_ckpt_manifest_free(&back);
    zb_ckpt_manifest_free(&m);

    /* one changed character anywhere: corrupt */
    char *text;
    size_t len;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    text = calloc(1, 65536);
    len = fread(text, 1, 65535, f);
    fclose(f);
    char *p = strstr(text, "step 7");
    p[5] = '8';
    write_text(path, text);
    assert_int_equal(zb_ckpt_manifest_read(path, &back, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "corrupt"));
    /* cut short: no end line */
    text[len / 2] = '\0';
    write_text(path, text);
    assert_int_equal(zb_ckpt_manifest_read(path, &back, &err), ZB_EFORMAT);
    free(text);
    /* not a manifest at all */
    write_text(path, "hello\n");
    assert_false(zb_ckpt_is_sharded(path));
    assert_int_equal(zb_ckpt_manifest_read(path, &back, &err), ZB_EFORMAT);
}

static void shard_checks(void **state)
{
    (void)state;
    enum { N = 64 };
    float p[N], m[N], v[N], q[N] = {0}, qm[N] = {0}, qv[N] = {0};
    for (int i = 0; i < N; i++)
        p[i] = (float)i, m[i] = 0.5f * (float)i, v[i] = 0.25f * (float)i;
    zb_ckpt_range_t rg[2] = {{0, 10, 0}, {40, 20, 40}};
    zb_ckpt_shard_ref_t ref;
    zb_err_t err;
    char file[128];
    snprintf(file, sizeof file, "%s/s.rank1", dir);
    assert_int_equal(zb_ckpt_shard_write(file, 1, 2, 5, rg, 2, p, m, v, N, &ref, &err), ZB_OK);
    unsigned char covered[N] = {0};
    assert_int_equal(zb_ckpt_shard_read(file, &ref, 1, 5, N, rg, 2, q, qm, qv, covered, &err),
                     ZB_OK);
    for (int i = 0; i < N; i++) {
        bool in = i < 10 || (i >= 40 && i < 60);
        assert_int_equal(covered[i], in);
        assert_true(q[i] == (in ? p[i] : 0.0f) && qv[i] == (in ? v[i] : 0.0f));
    }
    /* wrong rank or step, other ranges, damaged byte, short file */
    assert_int_equal(zb_ckpt_shard_read(file, &ref, 0, 5, N, NULL, 0, q, qm, qv, NULL, &err),
                     ZB_EFORMAT);
    assert_int_equal(zb_ckpt_shard_read(file, &ref, 1, 6, N, NULL, 0, q, qm, qv, NULL, &err),
                     ZB_EFORMAT);
    zb_ckpt_range_t other[1] = {{0, 30, 0}};
    assert_int_equal(zb_ckpt_shard_read(file, &ref, 1, 5, N, other, 1, q, qm, qv, NULL, &err),
                     ZB_EMISMATCH);
    FILE *f = fopen(file, "r+b");
    fseek(f, 200, SEEK_SET);
    fputc(0x7F, f);
    fclose(f);
    assert_int_equal(zb_ckpt_shard_read(file, &ref, 1, 5, N, NULL, 0, q, qm, qv, NULL, &err),
                     ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "corrupt"));
    assert_int_equal(truncate(file, 100), 0);
    assert_int_equal(zb_ckpt_shard_read(file, &ref, 1, 5, N, NULL, 0, q, qm, qv, NULL, &err),
                     ZB_EFORMAT);
    /* a range outside the parameters is refused before writing */
    zb_ckpt_range_t bad[1] = {{60, 10, 60}};
    assert_int_equal(zb_ckpt_shard_write(file, 1, 2, 5, bad, 1, p, m, v, N, &ref, &err),
                     ZB_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hash_is_independent_of_chunking),
        cmocka_unit_test(handshake_agrees),
        cmocka_unit_test(handshake_names_disagreements),
        cmocka_unit_test(handshake_reports_startup_failures_once),
        cmocka_unit_test_setup_teardown(manifest_round_trip_and_damage, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(shard_checks, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
