#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "demo.h"

NOINLINE void skip_spaces(parser_t *ps) { while (*ps->p == ' ') ps->p++; }

/* factor := number | '(' expr ')' | '-' factor */
NOINLINE long parse_factor(parser_t *ps) {
    skip_spaces(ps);
    if (*ps->p == '(') {
        ps->p++;
        long v = parse_expr(ps);
        skip_spaces(ps);
        if (*ps->p == ')') ps->p++; else ps->error = 1;
        return v;
    }
    if (*ps->p == '-') { ps->p++; return -parse_factor(ps); }
    long v = 0;
    while (*ps->p >= '0' && *ps->p <= '9') v = v * 10 + (*ps->p++ - '0');
    return v;
}

/* term := factor (('*' | '%') factor)* */
NOINLINE long parse_term(parser_t *ps) {
    long v = parse_factor(ps);
    for (;;) {
        skip_spaces(ps);
        char c = *ps->p;
        if (c != '*' && c != '%') return v;
        ps->p++;
        v = apply_op(c == '*' ? 2 : 3, v, parse_factor(ps));
    }
}

/* expr := term (('+' | '-') term)* */
NOINLINE long parse_expr(parser_t *ps) {
    long v = parse_term(ps);
    for (;;) {
        skip_spaces(ps);
        char c = *ps->p;
        if (c != '+' && c != '-') return v;
        ps->p++;
        v = apply_op(c == '+' ? 0 : 1, v, parse_term(ps));
    }
}

long eval_string(const char *s) {
    parser_t ps = {s, 0};
    long v = parse_expr(&ps);
    return ps.error ? 0 : v;
}

static void gen(char **out, size_t *len, size_t *cap, int depth) {
    if (*len + 64 > *cap) *out = realloc(*out, *cap *= 2);
    if (depth == 0 || rng_range(3) == 0) {
        *len += (size_t)sprintf(*out + *len, "%u", 1 + rng_range(97));
        return;
    }
    static const char ops[] = "+-*%";
    (*out)[(*len)++] = '(';
    gen(out, len, cap, depth - 1);
    *len += (size_t)sprintf(*out + *len, " %c ", ops[rng_range(4)]);
    gen(out, len, cap, depth - 1);
    (*out)[(*len)++] = ')';
    (*out)[*len] = 0;
}

char *expr_generate(int depth) {
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    gen(&s, &len, &cap, depth);
    s[len] = 0;
    return s;
}
