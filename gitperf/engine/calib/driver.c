/* calib OUT N: time N calls of each f_CLASS and write "CLASS ns_per_call" lines to OUT; then
 * "spin NS": the fastest of 3 runs of a fixed loop without calls (N x 10000 steps), whose
 * slowdown under the sampling timer alone gives the cost of one stack sample. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

long f_push(long), f_nop(long), f_nop5(long), f_branch(long), f_endbr(long), f_singlestep(long);
static long (*volatile fns[])(long) = {f_push, f_nop, f_nop5, f_branch, f_endbr, f_singlestep};
static const char *names[] = {"push", "nop", "nop5", "branch", "endbr", "singlestep"};
#define NCLASSES (int)(sizeof names / sizeof *names)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long n = atol(argv[2]);
    FILE *out = fopen(argv[1], "w");
    if (!out) return 1;
    for (int k = 0; k < NCLASSES; k++) {
        double t0 = now();
        for (long i = 0; i < n; i++) fns[k](i);
        fprintf(out, "%s %.1f\n", names[k], (now() - t0) / n);
    }
    double best = 0;
    for (int k = 0; k < 3; k++) {
        volatile unsigned long x = 1;
        double t0 = now();
        for (long i = 0; i < n * 10000; i++) x = x * 6364136223846793005UL + 1;
        double t = now() - t0;
        if (k == 0 || t < best) best = t;
    }
    fprintf(out, "spin %.0f\n", best);
    return fclose(out) != 0;
}
