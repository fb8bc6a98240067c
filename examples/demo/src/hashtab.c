#include <stdlib.h>
#include <string.h>
#include "demo.h"

hashtab_t *ht_new(size_t n_buckets) {
    hashtab_t *h = malloc(sizeof *h);
    h->buckets = calloc(n_buckets, sizeof *h->buckets);
    h->n_buckets = n_buckets;
    h->n_items = 0;
    return h;
}

/* FNV-1a: the helper every lookup goes through */
NOINLINE uint32_t ht_hash(const char *s) {
    uint32_t x = 2166136261u;
    while (*s) x = (x ^ (unsigned char)*s++) * 16777619u;
    return x;
}

NOINLINE entry_t *ht_lookup(hashtab_t *h, const char *key) {
    entry_t *e = h->buckets[ht_hash(key) % h->n_buckets];
    while (e && strcmp(e->key, key) != 0) e = e->next;
    return e;
}

NOINLINE void ht_grow(hashtab_t *h) {
    size_t nb = h->n_buckets * 2;
    entry_t **b = calloc(nb, sizeof *b);
    for (size_t i = 0; i < h->n_buckets; i++) {
        entry_t *e = h->buckets[i];
        while (e) {
            entry_t *next = e->next;
            uint32_t k = ht_hash(e->key) % nb;
            e->next = b[k];
            b[k] = e;
            e = next;
        }
    }
    free(h->buckets);
    h->buckets = b;
    h->n_buckets = nb;
}

NOINLINE void ht_insert(hashtab_t *h, const char *key) {
    entry_t *e = ht_lookup(h, key);
    if (e) { e->count++; return; }
    if (h->n_items >= h->n_buckets * 2) ht_grow(h);
    e = malloc(sizeof *e);
    e->key = strdup(key);
    e->count = 1;
    uint32_t k = ht_hash(key) % h->n_buckets;
    e->next = h->buckets[k];
    h->buckets[k] = e;
    h->n_items++;
}

size_t ht_entries(hashtab_t *h, entry_t ***out) {
    entry_t **v = malloc((h->n_items + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < h->n_buckets; i++)
        for (entry_t *e = h->buckets[i]; e; e = e->next) v[n++] = e;
    *out = v;
    return n;
}

void ht_free(hashtab_t *h) {
    for (size_t i = 0; i < h->n_buckets; i++) {
        entry_t *e = h->buckets[i];
        while (e) { entry_t *n = e->next; free(e->key); free(e); e = n; }
    }
    free(h->buckets);
    free(h);
}
