#include <stdlib.h>
#include <string.h>
#include "demo.h"

static const char *syllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "an", "el"};

/* Pseudo-text with a Zipf-like vocabulary: few words are very common. */
char *text_generate(size_t n_words) {
    size_t cap = n_words * 12 + 1, len = 0;
    char *text = malloc(cap);
    for (size_t i = 0; i < n_words; i++) {
        unsigned vocab = 1 + rng_range(1 + rng_range(400));
        unsigned v = vocab;
        do {
            const char *s = syllables[v % 12];
            text[len++] = s[0];
            text[len++] = s[1];
            v /= 12;
        } while (v);
        text[len++] = (i % 17 == 16) ? '\n' : ' ';
    }
    text[len] = 0;
    return text;
}

NOINLINE int is_word_char(int c) { return (c >= 'a' && c <= 'z') || c == '_'; }

size_t text_tokenize(const char *text, char ***words_out) {
    size_t cap = 1024, n = 0;
    char **words = malloc(cap * sizeof *words);
    const char *p = text;
    while (*p) {
        while (*p && !is_word_char((unsigned char)*p)) p++;
        const char *start = p;
        while (*p && is_word_char((unsigned char)*p)) p++;
        if (p > start) {
            if (n == cap) words = realloc(words, (cap *= 2) * sizeof *words);
            words[n++] = strndup(start, (size_t)(p - start));
        }
    }
    *words_out = words;
    return n;
}

void text_free_words(char **words, size_t n) {
    for (size_t i = 0; i < n; i++) free(words[i]);
    free(words);
}
