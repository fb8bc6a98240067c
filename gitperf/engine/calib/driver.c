/* calib OUT N: time N calls of each f_CLASS and write "CLASS ns_per_call" lines to OUT. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

long f_push(long), f_nop(long), f_branch(long), f_endbr(long), f_singlestep(long);
static long (*volatile fns[])(long) = {f_push, f_nop, f_branch, f_endbr, f_singlestep};
static const char *names[] = {"push", "nop", "branch", "endbr", "singlestep"};

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
    for (int k = 0; k < 5; k++) {
        double t0 = now();
        for (long i = 0; i < n; i++) fns[k](i);
        fprintf(out, "%s %.1f\n", names[k], (now() - t0) / n);
    }
    return fclose(out) != 0;
}
