/* wordstat: a small text-statistics tool used as git perf's bundled example.
 * It generates deterministic pseudo-text, counts words in a hash table, sorts them,
 * evaluates arithmetic expressions with a recursive-descent parser and checksums buffers. */
#ifndef DEMO_H
#define DEMO_H
#include <stddef.h>
#include <stdint.h>

#define NOINLINE __attribute__((noinline))

/* rng.c */
void rng_seed(uint64_t seed);
uint64_t rng_next(void);
unsigned rng_range(unsigned n);

/* text.c */
char *text_generate(size_t n_words);
size_t text_tokenize(const char *text, char ***words_out);
void text_free_words(char **words, size_t n);
int is_word_char(int c);

/* hashtab.c */
typedef struct entry { char *key; long count; struct entry *next; } entry_t;
typedef struct { entry_t **buckets; size_t n_buckets, n_items; } hashtab_t;
hashtab_t *ht_new(size_t n_buckets);
uint32_t ht_hash(const char *s);
entry_t *ht_lookup(hashtab_t *h, const char *key);
void ht_insert(hashtab_t *h, const char *key);
void ht_grow(hashtab_t *h);
size_t ht_entries(hashtab_t *h, entry_t ***out);
void ht_free(hashtab_t *h);

/* sort.c */
typedef int (*cmp_fn)(const void *, const void *);
void merge_sort(void **items, size_t n, cmp_fn cmp);
void insertion_sort(void **items, size_t n, cmp_fn cmp);
int cmp_by_count(const void *a, const void *b);
int cmp_by_key(const void *a, const void *b);

/* expr.c: recursive descent (parse_expr -> parse_term -> parse_factor -> parse_expr) */
typedef struct { const char *p; int error; } parser_t;
long parse_expr(parser_t *ps);
long parse_term(parser_t *ps);
long parse_factor(parser_t *ps);
long eval_string(const char *s);
char *expr_generate(int depth);
void skip_spaces(parser_t *ps);

/* mathx.c */
long fib(int n);
int is_even(unsigned n);
int is_odd(unsigned n);
uint32_t checksum_combine(uint32_t a, uint32_t b);
uint32_t checksum_block(const unsigned char *buf, size_t n);
uint32_t checksum_all(const char **bufs, size_t n);
long apply_op(int op, long a, long b);
long op_add(long a, long b);
long op_sub(long a, long b);
long op_mul(long a, long b);
long op_mod(long a, long b);

/* report.c */
void report_top(entry_t **entries, size_t n, size_t top);
void report_summary(size_t words, size_t unique, long exprs, uint32_t sum);
#endif
