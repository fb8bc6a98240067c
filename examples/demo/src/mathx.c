#include "demo.h"

/* naive on purpose: calls = 2*fib(n+1) - 1 */
NOINLINE long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

/* a pair of mutually recursive functions: is_even(n) makes n+1 calls in all */
NOINLINE int is_odd(unsigned n);
NOINLINE int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
NOINLINE int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

NOINLINE uint32_t checksum_combine(uint32_t a, uint32_t b) { return (b << 16) | a; }

/* Adler-32: the hot inner loop */
NOINLINE uint32_t checksum_block(const unsigned char *buf, size_t n) {
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + buf[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return checksum_combine(a, b);
}

uint32_t checksum_all(const char **bufs, size_t n) {
    uint32_t x = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *s = (const unsigned char *)bufs[i];
        size_t len = 0;
        while (s[len]) len++;
        x ^= checksum_block(s, len);
    }
    return x;
}

/* reached only through the op table */
long op_add(long a, long b) { return a + b; }
long op_sub(long a, long b) { return a - b; }
long op_mul(long a, long b) { return (a * b) % 1000003; }
long op_mod(long a, long b) { return b ? a % b : 0; }

typedef long (*op_fn)(long, long);
static op_fn op_table[4] = {op_add, op_sub, op_mul, op_mod};

NOINLINE long apply_op(int op, long a, long b) { return op_table[op & 3](a, b); }
