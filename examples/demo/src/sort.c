#include <stdlib.h>
#include <string.h>
#include "demo.h"

/* Called only through the cmp_fn pointer. */
int cmp_by_count(const void *a, const void *b) {
    const entry_t *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

int cmp_by_key(const void *a, const void *b) {
    return strcmp(((const entry_t *)a)->key, ((const entry_t *)b)->key);
}

NOINLINE void insertion_sort(void **items, size_t n, cmp_fn cmp) {
    for (size_t i = 1; i < n; i++) {
        void *v = items[i];
        size_t j = i;
        while (j > 0 && cmp(items[j - 1], v) > 0) { items[j] = items[j - 1]; j--; }
        items[j] = v;
    }
}

static void merge_rec(void **items, void **tmp, size_t n, cmp_fn cmp);

NOINLINE static void merge_halves(void **items, void **tmp, size_t mid, size_t n, cmp_fn cmp) {
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < n) tmp[k++] = cmp(items[i], items[j]) <= 0 ? items[i++] : items[j++];
    while (i < mid) tmp[k++] = items[i++];
    while (j < n) tmp[k++] = items[j++];
    memcpy(items, tmp, n * sizeof *items);
}

/* recursive merge sort, insertion sort below 16 items */
NOINLINE static void merge_rec(void **items, void **tmp, size_t n, cmp_fn cmp) {
    if (n < 16) { insertion_sort(items, n, cmp); return; }
    size_t mid = n / 2;
    merge_rec(items, tmp, mid, cmp);
    merge_rec(items + mid, tmp, n - mid, cmp);
    merge_halves(items, tmp, mid, n, cmp);
}

void merge_sort(void **items, size_t n, cmp_fn cmp) {
    void **tmp = malloc((n + 1) * sizeof *tmp);
    merge_rec(items, tmp, n, cmp);
    free(tmp);
}
