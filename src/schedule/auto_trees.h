/* Two small structures the greedy list scheduler (greedy_build.c) keeps so that each step costs
 * O(log P) instead of a walk over the ranks or over a rank's in-flight microbatches: a heap of
 * the ranks' clocks, a range-add / range-max segment tree and a max queue.
 * Internal; not part of the public API. */
#ifndef ZBPP_AUTO_TREES_H
#define ZBPP_AUTO_TREES_H

#include <math.h>
#include <stdbool.h>

/* Binary min-heap of (key, id) pairs with room for a fixed number of entries. */
typedef struct {
    int n, cap;
    double *key;
    int *id;
} zb_heap_t;

/* Allocate room for cap >= 1 entries, empty. false on out of memory. */
bool zb_heap_init(zb_heap_t *h, int cap);
void zb_heap_free(zb_heap_t *h);
/* Add (key, id); the caller keeps the count within cap. O(log n). */
void zb_heap_push(zb_heap_t *h, double key, int id);
/* The smallest key, +INFINITY when empty. O(1). */
static inline double zb_heap_top(const zb_heap_t *h) { return h->n ? h->key[0] : INFINITY; }
/* Remove the entry with the smallest key and return its id (the heap must not be empty). */
int zb_heap_pop(zb_heap_t *h);
/* Push (key, id) and pop the smallest in one pass (the heap must not be empty and key must
 * not be below the smallest key): returns the popped id. O(log n). */
int zb_heap_replace_top(zb_heap_t *h, double key, int id);

/* Min-heap of ids 0..n-1, each in it at most once, with removal by id. */
typedef struct {
    int n, cap;
    double *key; /* [cap] by heap position */
    int *id;     /* [cap] by heap position */
    int *pos;    /* [cap] heap position of each id, -1 when absent */
} zb_iheap_t;

/* Allocate for ids 0..cap-1, empty. false on out of memory. */
bool zb_iheap_init(zb_iheap_t *h, int cap);
void zb_iheap_free(zb_iheap_t *h);
/* Add id (absent) with key. O(log n). */
void zb_iheap_insert(zb_iheap_t *h, int id, double key);
/* Remove id if present. O(log n). */
void zb_iheap_remove(zb_iheap_t *h, int id);
/* The smallest key, +INFINITY when empty; its id. */
static inline double zb_iheap_top(const zb_iheap_t *h) { return h->n ? h->key[0] : INFINITY; }
static inline int zb_iheap_top_id(const zb_iheap_t *h) { return h->id[0]; }

/* Maximum over n slots with "add x to every slot of a range" (lazy, never pushed below what
 * a query needs). Slots start at -INFINITY, which an add leaves at -INFINITY. */
typedef struct {
    int n, h;  /* leaves (a power of two) and log2(n) */
    double *t; /* [2n] subtree max including the node's own pending add */
    double *d; /* [n] pending add of an inner node, applies to its whole subtree */
} zb_maxtree_t;

/* Allocate for n >= 1 slots, all -INFINITY. false on out of memory. */
bool zb_maxtree_init(zb_maxtree_t *m, int n);
void zb_maxtree_free(zb_maxtree_t *m);
/* Every slot to -INFINITY again (reuse without a new allocation). */
void zb_maxtree_reset(zb_maxtree_t *m);
/* Slot i takes value x (x may be -INFINITY: the slot leaves the maximum). O(log n). */
void zb_maxtree_assign(zb_maxtree_t *m, int i, double x);
/* Add x to slots lo..hi-1 (nothing if lo >= hi). O(log n). */
void zb_maxtree_add(zb_maxtree_t *m, int lo, int hi, double x);
/* Maximum of slots lo..hi-1 (-INFINITY if lo >= hi). O(log n). */
double zb_maxtree_max(zb_maxtree_t *m, int lo, int hi);

/* Maximum over a queue (push at the back, pop at the front) with "add x to every entry": the
 * classic monotonic deque, amortised O(1) per operation. */
typedef struct {
    int head, tail, cap;
    int *pos;    /* [cap] entry ids, oldest first, with strictly decreasing values */
    double *val; /* [cap] values less `off` */
    double off;
} zb_maxq_t;

/* Allocate for cap >= 1 pushes in all (ids are never re-pushed). false on out of memory. */
bool zb_maxq_init(zb_maxq_t *q, int cap);
void zb_maxq_free(zb_maxq_t *q);
/* Entry `id`, younger than every entry in the queue, joins with value x. */
void zb_maxq_push(zb_maxq_t *q, int id, double x);
/* The oldest entry, `id`, leaves. */
void zb_maxq_pop(zb_maxq_t *q, int id);
/* Add x to every entry. */
static inline void zb_maxq_add_all(zb_maxq_t *q, double x) { q->off += x; }
/* Largest value in the queue, -INFINITY when empty. */
static inline double zb_maxq_max(const zb_maxq_t *q)
{
    return q->head < q->tail ? q->val[q->head] + q->off : -INFINITY;
}

#endif
