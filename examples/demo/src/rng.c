#include "demo.h"

static uint64_t state = 88172645463325252ULL;

void rng_seed(uint64_t seed) { state = seed ? seed : 88172645463325252ULL; }

/* xorshift64: deterministic across machines, so call counts are reproducible */
NOINLINE uint64_t rng_next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

NOINLINE unsigned rng_range(unsigned n) { return (unsigned)(rng_next() % n); }
