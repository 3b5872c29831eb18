/* The greedy scheduler's helper structures (src/schedule/auto_trees.c) against plain arrays:
 * each random operation sequence must give the answers a brute-force walk gives. Values are
 * small integers, so the sums are exact and the comparisons can be ==. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>

#include "schedule/auto_trees.h"

static uint32_t rng = 12345;
static int rnd(int n)
{
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 8) % (uint32_t)n);
}

static void test_heap_pops_in_key_order(void **state)
{
    (void)state;
    enum { N = 57 };
    zb_heap_t h;
    assert_true(zb_heap_init(&h, N));
    double key[N];
    bool seen[N] = {false};
    for (int i = 0; i < N; i++) {
        key[i] = rnd(20); /* ties on purpose */
        zb_heap_push(&h, key[i], i);
    }
    double last = -INFINITY;
    for (int i = 0; i < N; i++) {
        double top = zb_heap_top(&h);
        int id = zb_heap_pop(&h);
        assert_false(seen[id]);
        seen[id] = true;
        assert_true(key[id] == top);
        assert_true(top >= last);
        last = top;
    }
    assert_true(isinf(zb_heap_top(&h)));
    zb_heap_free(&h);
}

/* replace_top (push a key not below the top, pop the top) against a plain array. */
static void test_heap_replace_top_matches_walk(void **state)
{
    (void)state;
    enum { N = 31 };
    zb_heap_t h;
    assert_true(zb_heap_init(&h, N));
    double key[N];
    bool in[N] = {false};
    for (int i = 0; i < N; i++) {
        key[i] = rnd(10);
        in[i] = true;
        zb_heap_push(&h, key[i], i);
    }
    for (int step = 0; step < 2000; step++) {
        double top = zb_heap_top(&h);
        int out = -1;
        for (int i = 0; i < N; i++)
            if (!in[i])
                out = i;
        int id;
        if (out >= 0) { /* the one outside comes back at or above the top */
            key[out] = top + rnd(5);
            in[out] = true;
            id = zb_heap_replace_top(&h, key[out], out);
        } else {
            id = zb_heap_pop(&h);
        }
        double best = INFINITY;
        for (int i = 0; i < N; i++)
            if (in[i] && key[i] < best)
                best = key[i];
        assert_true(in[id] && key[id] == best && best == top);
        in[id] = false;
    }
    zb_heap_free(&h);
}

static void test_iheap_top_is_min_of_present(void **state)
{
    (void)state;
    enum { N = 23 };
    zb_iheap_t h;
    assert_true(zb_iheap_init(&h, N));
    double key[N];
    bool in[N] = {false};
    for (int step = 0; step < 3000; step++) {
        int id = rnd(N);
        if (in[id]) {
            zb_iheap_remove(&h, id);
            in[id] = false;
        } else {
            key[id] = rnd(40);
            zb_iheap_insert(&h, id, key[id]);
            in[id] = true;
        }
        double best = INFINITY;
        for (int i = 0; i < N; i++)
            if (in[i] && key[i] < best)
                best = key[i];
        assert_true(zb_iheap_top(&h) == best);
        if (!isinf(best))
            assert_true(in[zb_iheap_top_id(&h)] && key[zb_iheap_top_id(&h)] == best);
    }
    zb_iheap_free(&h);
}

static double brute_max(const double *v, int lo, int hi)
{
    double m = -INFINITY;
    for (int i = lo; i < hi; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static void test_maxtree_matches_walk(void **state)
{
    (void)state;
    enum { N = 13 }; /* not a power of two */
    zb_maxtree_t t;
    assert_true(zb_maxtree_init(&t, N));
    double v[N];
    for (int i = 0; i < N; i++)
        v[i] = -INFINITY;
    for (int step = 0; step < 5000; step++) {
        int a = rnd(N + 1), b = rnd(N + 1), lo = a < b ? a : b, hi = a < b ? b : a;
        switch (rnd(3)) {
        case 0: {
            int i = rnd(N);
            double x = rnd(4) == 0 ? -INFINITY : rnd(100) - 50;
            zb_maxtree_assign(&t, i, x);
            v[i] = x;
            break;
        }
        case 1: {
            double x = rnd(21) - 10;
            zb_maxtree_add(&t, lo, hi, x);
            for (int i = lo; i < hi; i++)
                v[i] += x; /* -INFINITY stays -INFINITY */
            break;
        }
        default:
            assert_true(zb_maxtree_max(&t, lo, hi) == brute_max(v, lo, hi));
        }
    }
    zb_maxtree_reset(&t);
    assert_true(isinf(zb_maxtree_max(&t, 0, N)));
    zb_maxtree_free(&t);
}

static void test_maxq_matches_walk(void **state)
{
    (void)state;
    enum { N = 400 };
    zb_maxq_t q;
    assert_true(zb_maxq_init(&q, N));
    double v[N];
    int head = 0, tail = 0;
    for (int step = 0; step < 3 * N && tail < N; step++) {
        int op = rnd(3);
        if (op == 0 || head == tail) {
            v[tail] = rnd(60) - 30;
            zb_maxq_push(&q, tail, v[tail]);
            tail++;
        } else if (op == 1) {
            zb_maxq_pop(&q, head++);
        } else {
            double x = rnd(11) - 5;
            zb_maxq_add_all(&q, x);
            for (int i = head; i < tail; i++)
                v[i] += x;
        }
        assert_true(zb_maxq_max(&q) == brute_max(v, head, tail));
    }
    zb_maxq_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_pops_in_key_order),
        cmocka_unit_test(test_heap_replace_top_matches_walk),
        cmocka_unit_test(test_iheap_top_is_min_of_present),
        cmocka_unit_test(test_maxtree_matches_walk),
        cmocka_unit_test(test_maxq_matches_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
