/* For the greedy list scheduler: a heap of the ranks' clocks, a range-add / range-max tree
 * and a max queue over a rank's in-flight microbatches (see auto_trees.h).
 * The max tree is the bottom-up kind: a node's pending add stays on it and is only pushed down
 * along the two paths a query or an assignment walks. */
#include "schedule/auto_trees.h"

#include <math.h>
#include <stdlib.h>

static int pow2_at_least(int n, int *log2n)
{
    int p = 1, h = 0;
    while (p < n) {
        p *= 2;
        h++;
    }
    *log2n = h;
    return p;
}

/* The heaps and the max queue keep (double, int) pairs in two parallel arrays: both allocated
 * with cap entries, or neither (false, both NULL). */
static void pairs_free(double **vals, int **ids)
{
    free(*vals);
    free(*ids);
    *vals = NULL;
    *ids = NULL;
}

static bool pairs_alloc(int cap, double **vals, int **ids)
{
    *vals = malloc(sizeof(double) * (size_t)cap);
    *ids = malloc(sizeof(int) * (size_t)cap);
    if (*vals && *ids)
        return true;
    pairs_free(vals, ids);
    return false;
}

bool zb_heap_init(zb_heap_t *h, int cap)
{
    h->n = 0;
    h->cap = cap < 1 ? 1 : cap;
    return pairs_alloc(h->cap, &h->key, &h->id);
}

void zb_heap_free(zb_heap_t *h)
{
    pairs_free(&h->key, &h->id);
    h->n = 0;
}

/* Put (key, id) in slot i. */
static void heap_set(zb_heap_t *h, int i, double key, int id)
{
    h->key[i] = key;
    h->id[i] = id;
}

void zb_heap_push(zb_heap_t *h, double key, int id)
{
    int i = h->n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (h->key[p] <= key)
            break;
        heap_set(h, i, h->key[p], h->id[p]);
        i = p;
    }
    heap_set(h, i, key, id);
}

/* Sifting `key` down a min-heap of keys[0..n) from the hole at i: the child whose entry moves up
 * into the hole (the smaller one), or -1 when key belongs at i. Both heaps use it. */
static int sift_child(const double *keys, int n, int i, double key)
{
    int c = 2 * i + 1;
    if (c >= n)
        return -1;
    if (c + 1 < n && keys[c + 1] < keys[c])
        c++;
    return key <= keys[c] ? -1 : c;
}

/* Sift (key, id) down from the root hole. */
static void heap_sift_down(zb_heap_t *h, double key, int id)
{
    int i = 0, c;
    while ((c = sift_child(h->key, h->n, i, key)) >= 0) {
        heap_set(h, i, h->key[c], h->id[c]);
        i = c;
    }
    heap_set(h, i, key, id);
}

int zb_heap_replace_top(zb_heap_t *h, double key, int id)
{
    int top = h->id[0];
    heap_sift_down(h, key, id);
    return top;
}

int zb_heap_pop(zb_heap_t *h)
{
    int top = h->id[0];
    if (--h->n > 0) /* the last entry fills the root hole */
        heap_sift_down(h, h->key[h->n], h->id[h->n]);
    return top;
}

bool zb_iheap_init(zb_iheap_t *h, int cap)
{
    h->n = 0;
    h->cap = cap < 1 ? 1 : cap;
    bool pairs = pairs_alloc(h->cap, &h->key, &h->id);
    h->pos = malloc(sizeof(int) * (size_t)h->cap);
    if (!pairs || !h->pos) {
        zb_iheap_free(h);
        return false;
    }
    for (int i = 0; i < h->cap; i++)
        h->pos[i] = -1;
    return true;
}

void zb_iheap_free(zb_iheap_t *h)
{
    pairs_free(&h->key, &h->id);
    free(h->pos);
    h->pos = NULL;
    h->n = 0;
}

static void iheap_put(zb_iheap_t *h, int i, double key, int id)
{
    h->key[i] = key;
    h->id[i] = id;
    h->pos[id] = i;
}

/* Move the entry (key, id) to its place, starting from the hole at position i. */
static void iheap_settle(zb_iheap_t *h, int i, double key, int id)
{
    while (i > 0 && h->key[(i - 1) / 2] > key) { /* up */
        int p = (i - 1) / 2;
        iheap_put(h, i, h->key[p], h->id[p]);
        i = p;
    }
    int c;
    while ((c = sift_child(h->key, h->n, i, key)) >= 0) { /* down */
        iheap_put(h, i, h->key[c], h->id[c]);
        i = c;
    }
    iheap_put(h, i, key, id);
}

void zb_iheap_insert(zb_iheap_t *h, int id, double key)
{
    iheap_settle(h, h->n++, key, id);
}

void zb_iheap_remove(zb_iheap_t *h, int id)
{
    int i = h->pos[id];
    if (i < 0)
        return;
    h->pos[id] = -1;
    int last = --h->n;
    if (i < last)
        iheap_settle(h, i, h->key[last], h->id[last]);
}

bool zb_maxtree_init(zb_maxtree_t *m, int n)
{
    m->n = pow2_at_least(n < 1 ? 1 : n, &m->h);
    m->t = malloc(sizeof(double) * 2 * (size_t)m->n);
    m->d = malloc(sizeof(double) * (size_t)m->n);
    if (!m->t || !m->d) {
        zb_maxtree_free(m);
        return false;
    }
    zb_maxtree_reset(m);
    return true;
}

void zb_maxtree_free(zb_maxtree_t *m)
{
    free(m->t);
    free(m->d);
    m->t = m->d = NULL;
}

void zb_maxtree_reset(zb_maxtree_t *m)
{
    for (int i = 0; i < 2 * m->n; i++)
        m->t[i] = -INFINITY;
    for (int i = 0; i < m->n; i++)
        m->d[i] = 0;
}

static void apply(zb_maxtree_t *m, int p, double x)
{
    m->t[p] += x;
    if (p < m->n)
        m->d[p] += x;
}

/* Recompute the ancestors of node p from their children. */
static void rebuild(zb_maxtree_t *m, int p)
{
    for (p >>= 1; p >= 1; p >>= 1) {
        double a = m->t[2 * p], b = m->t[2 * p + 1];
        m->t[p] = (a > b ? a : b) + m->d[p];
    }
}

/* Push the pending adds of p's ancestors down, root first, so p's own value is exact. */
static void push(zb_maxtree_t *m, int p)
{
    for (int s = m->h; s > 0; s--) {
        int i = p >> s;
        if (m->d[i] != 0) {
            apply(m, 2 * i, m->d[i]);
            apply(m, 2 * i + 1, m->d[i]);
            m->d[i] = 0;
        }
    }
}

void zb_maxtree_assign(zb_maxtree_t *m, int i, double x)
{
    int p = i + m->n;
    push(m, p);
    m->t[p] = x;
    rebuild(m, p);
}

void zb_maxtree_add(zb_maxtree_t *m, int lo, int hi, double x)
{
    if (lo >= hi)
        return;
    int l = lo + m->n, r = hi + m->n;
    const int l0 = l, r0 = r - 1;
    for (; l < r; l >>= 1, r >>= 1) {
        if (l & 1)
            apply(m, l++, x);
        if (r & 1)
            apply(m, --r, x);
    }
    rebuild(m, l0);
    rebuild(m, r0);
}

double zb_maxtree_max(zb_maxtree_t *m, int lo, int hi)
{
    if (lo >= hi)
        return -INFINITY;
    int l = lo + m->n, r = hi + m->n;
    push(m, l);
    push(m, r - 1);
    double res = -INFINITY;
    for (; l < r; l >>= 1, r >>= 1) {
        if (l & 1) {
            double v = m->t[l++];
            res = v > res ? v : res;
        }
        if (r & 1) {
            double v = m->t[--r];
            res = v > res ? v : res;
        }
    }
    return res;
}

bool zb_maxq_init(zb_maxq_t *q, int cap)
{
    q->head = q->tail = 0;
    q->off = 0;
    q->cap = cap < 1 ? 1 : cap;
    return pairs_alloc(q->cap, &q->val, &q->pos);
}

void zb_maxq_free(zb_maxq_t *q) { pairs_free(&q->val, &q->pos); }

void zb_maxq_push(zb_maxq_t *q, int id, double x)
{
    double v = x - q->off;
    while (q->tail > q->head && q->val[q->tail - 1] <= v)
        q->tail--; /* older and not larger: never the maximum again */
    q->pos[q->tail] = id;
    q->val[q->tail++] = v;
}

void zb_maxq_pop(zb_maxq_t *q, int id)
{
    if (q->head < q->tail && q->pos[q->head] == id)
        q->head++; /* else it was dropped when a larger, younger one joined */
}
