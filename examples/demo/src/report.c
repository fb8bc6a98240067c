#include <stdio.h>
#include "demo.h"

void report_top(entry_t **entries, size_t n, size_t top) {
    for (size_t i = 0; i < n && i < top; i++) printf("%-12s %ld\n", entries[i]->key, entries[i]->count);
}

void report_summary(size_t words, size_t unique, long exprs, uint32_t sum) {
    printf("words=%zu unique=%zu exprs=%ld checksum=%08x\n", words, unique, exprs, sum);
}
