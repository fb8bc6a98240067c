/* wordstat WORDS EXPRS [SEED]
 *   WORDS  pseudo-words to generate and count      EXPRS  expressions to generate and evaluate */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "demo.h"

static size_t count_words(hashtab_t *h, const char *text) {
    char **words;
    size_t n = text_tokenize(text, &words);
    for (size_t i = 0; i < n; i++) ht_insert(h, words[i]);
    text_free_words(words, n);
    return n;
}

static long run_exprs(long n, const char **keep) {
    long total = 0;
    for (long i = 0; i < n; i++) {
        char *e = expr_generate(6);
        total = (total + eval_string(e)) % 1000003;
        if (i < 8) keep[i] = e; else free(e);
    }
    return total;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s WORDS EXPRS [SEED]\n", argv[0]);
        return 2;
    }
    long n_words = atol(argv[1]), n_exprs = atol(argv[2]);
    rng_seed(argc > 3 ? strtoull(argv[3], NULL, 10) : 1);

    char *text = text_generate((size_t)n_words);
    hashtab_t *h = ht_new(64);
    size_t words = count_words(h, text);

    entry_t **entries;
    size_t unique = ht_entries(h, &entries);
    merge_sort((void **)entries, unique, cmp_by_count);
    report_top(entries, unique, 5);

    const char *keep[8] = {0};
    long exprs = run_exprs(n_exprs, keep);
    uint32_t sum = checksum_all(keep, n_exprs < 8 ? (size_t)n_exprs : 8);
    for (int r = 0; r < 4; r++) sum ^= checksum_block((const unsigned char *)text, strlen(text));
    sum ^= (uint32_t)fib(22) ^ (uint32_t)is_even(1001);
    report_summary(words, unique, exprs, sum);

    free(entries);
    free(text);
    ht_free(h);
    return 0;
}
