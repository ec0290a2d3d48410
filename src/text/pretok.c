/* Pre-tokenizer patterns in PCRE2. Hugging Face compiles them with
 * Oniguruma, whose \s and \S are Unicode's White_Space (with U+0085, without
 * U+FEFF); PCRE2's \s is not, so they are rewritten to \p{White_Space}. UTF
 * mode with PCRE2_MATCH_INVALID_UTF: invalid UTF-8 is matched by nothing
 * (docs/tokenizer.md, "Invalid UTF-8"). ^ and $ match at line ends, as in
 * Oniguruma's Ruby syntax. JIT-compiled where PCRE2 can. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

#define WS "\\p{White_Space}"
#define NOT_WS "\\P{White_Space}"

tmm_status tmm_tok_compile(const char *pattern, bool literal, pcre2_code **out)
{
    *out = NULL;
    size_t n = strlen(pattern);
    char *p = malloc(n * (sizeof WS - 2) + 1);
    if (!p)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a pattern of %zu bytes", n);
    size_t k = 0;
    if (literal) {
        memcpy(p, pattern, n + 1);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (pattern[i] == '\\' && (pattern[i + 1] == 's' || pattern[i + 1] == 'S')) {
                const char *with = pattern[i + 1] == 's' ? WS : NOT_WS;
                memcpy(p + k, with, strlen(with));
                k += strlen(with);
                i++;
            } else if (pattern[i] == '\\' && pattern[i + 1]) {
                p[k++] = pattern[i++];
                p[k++] = pattern[i];
            } else {
                p[k++] = pattern[i];
            }
        }
        p[k] = '\0';
    }
    int err;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)p, PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
    free(p);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "pre-tokenizer pattern '%.60s%s' does not compile: %s", pattern,
                        n > 60 ? "..." : "", (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT the interpreter gives the same matches */
    *out = re;
    return TMM_OK;
}

void tmm_tok_pattern_free(tok_pattern *p)
{
    free(p->text);
    pcre2_code_free(p->re);
    *p = (tok_pattern){ 0 };
}
