/* IFEval's instruction checks, each written from the reference
 * implementation's check_following (instructions.py); the regular
 * expressions are the reference's, run by PCRE2 on bytes. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/ifeval.h"

#include <pcre2.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    R_LOWERCASE, R_CAPITAL, R_CAPITAL_FREQ, R_REPEAT_PROMPT, R_TWO_RESPONSES, R_PLACEHOLDERS, R_POSTSCRIPT,
    R_CONSTRAINED, R_JSON, R_SECTIONS, R_BULLETS, R_HIGHLIGHTS, R_TITLE, R_EXISTENCE, R_FORBIDDEN, R_FREQUENCY,
    R_LETTER_FREQ, R_PARAGRAPHS, R_SENTENCES, R_WORDS, R_NO_COMMA, R_END, R_QUOTATION, R_NTH_FIRST, R_COUNT
};

static const char *const names[R_COUNT + 1] = {
    "change_case:english_lowercase", "change_case:english_capital", "change_case:capital_word_frequency",
    "combination:repeat_prompt", "combination:two_responses", "detectable_content:number_placeholders",
    "detectable_content:postscript", "detectable_format:constrained_response", "detectable_format:json_format",
    "detectable_format:multiple_sections", "detectable_format:number_bullet_lists",
    "detectable_format:number_highlighted_sections", "detectable_format:title", "keywords:existence",
    "keywords:forbidden_words", "keywords:frequency", "keywords:letter_frequency",
    "length_constraints:number_paragraphs", "length_constraints:number_sentences",
    "length_constraints:number_words", "punctuation:no_comma", "startend:end_checker", "startend:quotation",
    "length_constraints:nth_paragraph_first_word", NULL
};

const char *const *tmm_ifeval_rule_names(void) { return names; }

void tmm_ifeval_rule_free(tmm_ifeval_rule *r)
{
    free(r->text);
    for (uint32_t i = 0; i < r->n_words; i++)
        free(r->words[i]);
    free(r->words);
    r->text = NULL, r->words = NULL, r->n_words = 0;
}

/* kwargs[key]: absent or null is an error for a rule that needs it */
static int need(const cJSON *kw, const char *key, const cJSON **v, char *msg, size_t size)
{
    *v = cJSON_GetObjectItemCaseSensitive(kw, key);
    if (!*v || cJSON_IsNull(*v)) {
        snprintf(msg, size, "kwargs has no \"%s\"", key);
        return -1;
    }
    return 0;
}

static int need_int(const cJSON *kw, const char *key, int64_t *out, char *msg, size_t size)
{
    const cJSON *v;
    if (need(kw, key, &v, msg, size))
        return -1;
    /* the range before the cast: converting a double outside int64_t's range is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e9) ||
        v->valuedouble != floor(v->valuedouble)) {
        snprintf(msg, size, "kwargs \"%s\" must be a whole number from 0 to 1e9", key);
        return -1;
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int need_text(const cJSON *kw, const char *key, char **out, char *msg, size_t size)
{
    const cJSON *v;
    if (need(kw, key, &v, msg, size))
        return -1;
    if (!cJSON_IsString(v)) {
        snprintf(msg, size, "kwargs \"%s\" must be a string", key);
        return -1;
    }
    if (!(*out = strdup(v->valuestring))) {
        snprintf(msg, size, "out of host memory");
        return -1;
    }
    return 0;
}

static int need_relation(const cJSON *kw, const char *key, bool *at_least, char *msg, size_t size)
{
    const cJSON *v;
    if (need(kw, key, &v, msg, size))
        return -1;
    if (cJSON_IsString(v) && strcmp(v->valuestring, "at least") == 0)
        *at_least = true;
    else if (cJSON_IsString(v) && strcmp(v->valuestring, "less than") == 0)
        *at_least = false;
    else {
        snprintf(msg, size, "kwargs \"%s\" must be \"less than\" or \"at least\"", key);
        return -1;
    }
    return 0;
}

static int need_words(const cJSON *kw, const char *key, tmm_ifeval_rule *r, char *msg, size_t size)
{
    const cJSON *v, *e;
    if (need(kw, key, &v, msg, size))
        return -1;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0 || n > 256) {
        snprintf(msg, size, "kwargs \"%s\" must be an array of at most 256 strings", key);
        return -1;
    }
    if (n && !(r->words = calloc((size_t)n, sizeof *r->words))) {
        snprintf(msg, size, "out of host memory");
        return -1;
    }
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e) || !(r->words[r->n_words] = strdup(e->valuestring))) {
            snprintf(msg, size, "kwargs \"%s\" must hold strings", key);
            return -1;
        }
        r->n_words++;
    }
    return 0;
}

/* a pattern made of the rule's text is checked when read */
static int count_matches(const char *pattern, const char *subject, uint32_t options, int64_t *count);

static int check_pattern(const char *pattern, char *msg, size_t size)
{
    int64_t n;
    if (count_matches(pattern, "", 0, &n) < 0) {
        snprintf(msg, size, "\"%.60s\" is not a valid regular expression", pattern);
        return -1;
    }
    return 0;
}

int tmm_ifeval_rule_parse(const char *id, const cJSON *kw, tmm_ifeval_rule *r, char *msg, size_t size)
{
    memset(r, 0, sizeof *r);
    r->kind = -1;
    for (int i = 0; i < R_COUNT; i++)
        if (strcmp(id, names[i]) == 0)
            r->kind = i;
    if (r->kind < 0) {
        snprintf(msg, size, "an instruction tmm does not check: %.60s", id);
        return 1;
    }
    switch (r->kind) {
    case R_CAPITAL_FREQ:
        return need_int(kw, "capital_frequency", &r->number, msg, size) ||
                       need_relation(kw, "capital_relation", &r->at_least, msg, size) ? -1 : 0;
    case R_REPEAT_PROMPT: return need_text(kw, "prompt_to_repeat", &r->text, msg, size);
    case R_PLACEHOLDERS: return need_int(kw, "num_placeholders", &r->number, msg, size);
    case R_POSTSCRIPT: {
        if (need_text(kw, "postscript_marker", &r->text, msg, size))
            return -1;
        for (char *p = r->text; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        return check_pattern(r->text, msg, size);
    }
    case R_SECTIONS:
        if (need_text(kw, "section_spliter", &r->text, msg, size) || need_int(kw, "num_sections", &r->number, msg, size))
            return -1;
        return check_pattern(r->text, msg, size);
    case R_BULLETS: return need_int(kw, "num_bullets", &r->number, msg, size);
    case R_HIGHLIGHTS: return need_int(kw, "num_highlights", &r->number, msg, size);
    case R_EXISTENCE:
    case R_FORBIDDEN:
        if (need_words(kw, r->kind == R_EXISTENCE ? "keywords" : "forbidden_words", r, msg, size))
            return -1;
        for (uint32_t i = 0; i < r->n_words; i++)
            if (check_pattern(r->words[i], msg, size))
                return -1;
        return 0;
    case R_FREQUENCY:
        if (need_text(kw, "keyword", &r->text, msg, size) || need_int(kw, "frequency", &r->number, msg, size) ||
            need_relation(kw, "relation", &r->at_least, msg, size))
            return -1;
        return check_pattern(r->text, msg, size);
    case R_LETTER_FREQ:
        if (need_text(kw, "letter", &r->text, msg, size) || need_int(kw, "let_frequency", &r->number, msg, size) ||
            need_relation(kw, "let_relation", &r->at_least, msg, size))
            return -1;
        if (strlen(r->text) != 1) {
            snprintf(msg, size, "kwargs \"letter\" must be one character");
            return -1;
        }
        return 0;
    case R_PARAGRAPHS: return need_int(kw, "num_paragraphs", &r->number, msg, size);
    case R_SENTENCES:
        return need_int(kw, "num_sentences", &r->number, msg, size) ||
                       need_relation(kw, "relation", &r->at_least, msg, size) ? -1 : 0;
    case R_WORDS:
        return need_int(kw, "num_words", &r->number, msg, size) ||
                       need_relation(kw, "relation", &r->at_least, msg, size) ? -1 : 0;
    case R_END: return need_text(kw, "end_phrase", &r->text, msg, size);
    case R_NTH_FIRST:
        if (need_int(kw, "num_paragraphs", &r->number, msg, size) || need_int(kw, "nth_paragraph", &r->nth, msg, size) ||
            need_text(kw, "first_word", &r->text, msg, size))
            return -1;
        if (r->nth < 1) {
            snprintf(msg, size, "kwargs \"nth_paragraph\" must be at least 1");
            return -1;
        }
        for (char *p = r->text; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        return 0;
    default: return 0;
    }
}

/* ---- helpers ---- */
/* pcre2_match with a bound on backtracking (a keyword is a pattern from the
 * task file): past it the match fails, as no match */
static int bounded_match(const pcre2_code *re, const char *subject, size_t len, size_t at, pcre2_match_data *md)
{
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (mc)
        pcre2_set_match_limit(mc, 100000);
    int m = pcre2_match(re, (PCRE2_SPTR)subject, len, at, 0, md, mc);
    pcre2_match_context_free(mc);
    return m;
}

static int count_matches(const char *pattern, const char *subject, uint32_t options, int64_t *count)
{
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, options, &err, &off, NULL);
    if (!re)
        return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? 0 : -1;
    size_t len = strlen(subject), at = 0;
    *count = 0;
    while (md && at <= len) {
        int m = bounded_match(re, subject, len, at, md);
        if (m < 0) {
            rc = m == PCRE2_ERROR_NOMATCH || m == PCRE2_ERROR_MATCHLIMIT ? 0 : -1;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        (*count)++;
        at = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc;
}

static int64_t matches(const char *pattern, const char *subject, uint32_t options)
{
    int64_t n;
    return count_matches(pattern, subject, options, &n) < 0 ? 0 : n;
}

static bool ws(char c);

/* re.findall(pattern, subject) counting the matches that hold something
 * besides whitespace and the characters of `trim` */
static int64_t nonblank_matches(const char *pattern, const char *subject, const char *trim)
{
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    size_t len = strlen(subject), at = 0;
    int64_t n = 0;
    while (md && at <= len && bounded_match(re, subject, len, at, md) >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        bool something = false;
        for (size_t i = ov[0]; i < ov[1] && !something; i++)
            something = !ws(subject[i]) && !strchr(trim, subject[i]);
        n += something;
        at = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return n;
}

static bool ws(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool lower_c(char c) { return c >= 'a' && c <= 'z'; }
static bool upper_c(char c) { return c >= 'A' && c <= 'Z'; }
static bool word_c(char c) { return (unsigned char)c >= 128 || c == '_' || (c >= '0' && c <= '9') || lower_c(c) || upper_c(c); }

/* s stripped of whitespace at both ends, into a malloc'ed copy */
static char *strip(const char *s, size_t n)
{
    while (n && ws(*s))
        s++, n--;
    while (n && ws(s[n - 1]))
        n--;
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *lowered(const char *s)
{
    char *d = strdup(s);
    for (char *p = d; p && *p; p++)
        *p = (char)(upper_c(*p) ? *p + 32 : *p);
    return d;
}

static bool compare(int64_t have, const tmm_ifeval_rule *r) { return r->at_least ? have >= r->number : have < r->number; }

/* Python's str.islower / isupper over ASCII: some cased letter, none of the other case */
static bool all_case(const char *s, bool upper)
{
    bool cased = false;
    for (; *s; s++) {
        if (upper ? lower_c(*s) : upper_c(*s))
            return false;
        cased |= lower_c(*s) || upper_c(*s);
    }
    return cased;
}

static int64_t count_words(const char *s)
{
    int64_t n = 0;
    for (size_t i = 0; s[i]; i++)
        n += word_c(s[i]) && (i == 0 || !word_c(s[i - 1]));
    return n;
}

/* sentences end at a run of . ! ? followed by whitespace or the end; text after the last one is one more */
static int64_t count_sentences(const char *s)
{
    int64_t n = 0;
    bool text = false;
    for (size_t i = 0; s[i]; i++) {
        bool end = s[i] == '.' || s[i] == '!' || s[i] == '?';
        if (end && text && (s[i + 1] == '\0' || ws(s[i + 1]))) {
            n++;
            text = false;
        } else if (!ws(s[i]) && !end) {
            text = true;
        }
    }
    return n + text;
}

static bool is_json(const char *value)
{
    char *v = strip(value, strlen(value));
    if (!v)
        return false;
    char *p = v;
    static const char *const prefixes[] = { "```json", "```Json", "```JSON", "```" };
    for (int i = 0; i < 4; i++)
        if (strncmp(p, prefixes[i], strlen(prefixes[i])) == 0) {
            p += strlen(prefixes[i]);
            break;
        }
    size_t n = strlen(p);
    if (n >= 3 && strcmp(p + n - 3, "```") == 0)
        p[n - 3] = '\0';
    char *body = strip(p, strlen(p));
    cJSON *j = body ? cJSON_ParseWithOpts(body, NULL, true) : NULL;
    bool ok = j != NULL;
    cJSON_Delete(j);
    free(body), free(v);
    return ok;
}

static bool paragraphs_ok(const char *value, int64_t want)
{
    /* re.split(r"\s?\*\*\*\s?", value): empty pieces are allowed only first and last */
    pcre2_code *re;
    int err;
    PCRE2_SIZE off;
    re = pcre2_compile((PCRE2_SPTR) "\\s?\\*\\*\\*\\s?", PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    bool ok = md != NULL;
    size_t len = strlen(value), at = 0;
    int64_t pieces = 0, count = 0;
    bool empty_inner = false, last_empty = false;
    while (ok) {
        int m = bounded_match(re, value, len, at, md);
        size_t end = m >= 0 ? pcre2_get_ovector_pointer(md)[0] : len;
        bool blank = true;
        for (size_t i = at; i < end && blank; i++)
            blank = ws(value[i]);
        if (blank && pieces > 0 && m >= 0)
            empty_inner = true;
        count += !blank;
        last_empty = blank;
        pieces++;
        if (m < 0)
            break;
        at = pcre2_get_ovector_pointer(md)[1];
    }
    (void)last_empty;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return ok && !empty_inner && count == want;
}

static bool two_responses(const char *value)
{
    /* value.split("******"): two non-blank, different responses; blank only first or last */
    char *parts[3] = { 0 };
    int valid = 0, pieces = 0;
    bool ok = true;
    const char *p = value;
    for (;;) {
        const char *q = strstr(p, "******");
        size_t n = q ? (size_t)(q - p) : strlen(p);
        char *s = strip(p, n);
        if (!s) {
            ok = false;
            break;
        }
        bool last = !q;
        if (!*s) {
            if (pieces != 0 && !last)
                ok = false;
            free(s);
        } else if (valid < 2) {
            parts[valid++] = s;
        } else {
            valid++;
            free(s);
        }
        pieces++;
        if (!q || !ok)
            break;
        p = q + 6;
    }
    ok = ok && valid == 2 && strcmp(parts[0], parts[1]) != 0;
    free(parts[0]), free(parts[1]);
    return ok;
}

/* re.split(r"\n\n", value): N non-blank paragraphs, and the nth's first word
 * (quotes stripped from its front, cut at . , ? ! ' ") is the given one */
static bool nth_first_word(const tmm_ifeval_rule *r, const char *value)
{
    int64_t count = 0, index = 0;
    const char *nth = NULL, *nth_end = NULL;
    for (const char *p = value;; index++) {
        const char *q = strstr(p, "\n\n"), *e = q ? q : p + strlen(p);
        bool blank = true;
        for (const char *c = p; c < e && blank; c++)
            blank = ws(*c);
        count += !blank;
        if (index == r->nth - 1)
            nth = p, nth_end = e;
        if (!q)
            break;
        p = q + 2;
    }
    if (!nth)
        return false; /* the reference fails with an IndexError */
    while (nth < nth_end && ws(*nth))
        nth++;
    if (nth == nth_end)
        return false;
    const char *w = nth;
    while (w < nth_end && *w == '\'')
        w++;
    while (w < nth_end && *w == '"')
        w++;
    char first[256];
    size_t n = 0;
    for (; w < nth_end && !ws(*w) && !strchr(".,?!'\"", *w) && n + 1 < sizeof first; w++)
        first[n++] = upper_c(*w) ? (char)(*w + 32) : *w;
    first[n] = '\0';
    return count == r->number && strcmp(first, r->text) == 0;
}

static bool check(const tmm_ifeval_rule *r, const char *value)
{
    switch (r->kind) {
    case R_LOWERCASE: return all_case(value, false);
    case R_CAPITAL: return all_case(value, true);
    case R_CAPITAL_FREQ: {
        int64_t n = 0;
        for (size_t i = 0; value[i];) {
            if (!word_c(value[i])) {
                i++;
                continue;
            }
            bool has_upper = false, has_lower = false;
            for (; value[i] && word_c(value[i]); i++)
                has_upper |= upper_c(value[i]), has_lower |= lower_c(value[i]);
            n += has_upper && !has_lower;
        }
        return compare(n, r);
    }
    case R_REPEAT_PROMPT: {
        char *v = strip(value, strlen(value)), *p = strip(r->text, strlen(r->text));
        char *lv = v ? lowered(v) : NULL, *lp = p ? lowered(p) : NULL;
        bool ok = lv && lp && strncmp(lv, lp, strlen(lp)) == 0;
        free(v), free(p), free(lv), free(lp);
        return ok;
    }
    case R_TWO_RESPONSES: return two_responses(value);
    case R_PLACEHOLDERS: return matches("\\[.*?\\]", value, 0) >= r->number;
    case R_POSTSCRIPT: {
        const char *pattern = strcmp(r->text, "p.s.") == 0 ? "\\s*p\\.\\s?s\\..*$"
                              : strcmp(r->text, "p.p.s") == 0 ? "\\s*p\\.\\s?p\\.\\s?s.*$" : NULL;
        char buf[600];
        if (!pattern) {
            snprintf(buf, sizeof buf, "\\s*%.500s.*$", r->text);
            pattern = buf;
        }
        char *lv = lowered(value);
        bool ok = lv && matches(pattern, lv, PCRE2_MULTILINE) > 0;
        free(lv);
        return ok;
    }
    case R_CONSTRAINED:
        return strstr(value, "My answer is yes.") || strstr(value, "My answer is no.") ||
               strstr(value, "My answer is maybe.");
    case R_JSON: return is_json(value);
    case R_SECTIONS: {
        char pattern[600];
        snprintf(pattern, sizeof pattern, "\\s?%.500s\\s?\\d+\\s?", r->text);
        return matches(pattern, value, 0) >= r->number;
    }
    case R_BULLETS:
        return matches("^\\s*\\*[^\\*].*$", value, PCRE2_MULTILINE) + matches("^\\s*-.*$", value, PCRE2_MULTILINE) ==
               r->number;
    case R_HIGHLIGHTS: /* the matches of *x* and **x** whose x is not blank */
        return nonblank_matches("\\*[^\\n\\*]*\\*", value, "*") + nonblank_matches("\\*\\*[^\\n\\*]*\\*\\*", value, "*") >=
               r->number;
    case R_TITLE: return nonblank_matches("<<[^\\n]+>>", value, "<>") > 0;
    case R_EXISTENCE:
        for (uint32_t i = 0; i < r->n_words; i++)
            if (matches(r->words[i], value, PCRE2_CASELESS) == 0)
                return false;
        return true;
    case R_FORBIDDEN:
        for (uint32_t i = 0; i < r->n_words; i++) {
            char pattern[600];
            snprintf(pattern, sizeof pattern, "\\b%.500s\\b", r->words[i]);
            if (matches(pattern, value, PCRE2_CASELESS) > 0)
                return false;
        }
        return true;
    case R_FREQUENCY: return compare(matches(r->text, value, PCRE2_CASELESS), r);
    case R_LETTER_FREQ: {
        char want = upper_c(r->text[0]) ? (char)(r->text[0] + 32) : r->text[0];
        int64_t n = 0;
        for (const char *p = value; *p; p++)
            n += (upper_c(*p) ? *p + 32 : *p) == want;
        return compare(n, r);
    }
    case R_PARAGRAPHS: return paragraphs_ok(value, r->number);
    case R_SENTENCES: return compare(count_sentences(value), r);
    case R_WORDS: return compare(count_words(value), r);
    case R_NO_COMMA: return !strchr(value, ',');
    case R_END: {
        char *v = strip(value, strlen(value)), *p = strip(r->text, strlen(r->text));
        char *lv = v ? lowered(v) : NULL, *lp = p ? lowered(p) : NULL;
        size_t nv = lv ? strlen(lv) : 0, np = lp ? strlen(lp) : 0;
        bool ok = lv && lp && nv >= np && strcmp(lv + nv - np, lp) == 0;
        free(v), free(p), free(lv), free(lp);
        return ok;
    }
    case R_NTH_FIRST: return nth_first_word(r, value);
    case R_QUOTATION: {
        char *v = strip(value, strlen(value));
        size_t n = v ? strlen(v) : 0;
        bool ok = n > 1 && v[0] == '"' && v[n - 1] == '"';
        free(v);
        return ok;
    }
    default: return false;
    }
}

static bool blank(const char *s)
{
    for (; *s; s++)
        if (!ws(*s))
            return false;
    return true;
}

bool tmm_ifeval_follows(const tmm_ifeval_rule *r, const char *response)
{
    return r->kind >= 0 && !blank(response) && check(r, response);
}

static char *without_stars(const char *s)
{
    char *d = malloc(strlen(s) + 1), *q = d;
    if (!d)
        return NULL;
    for (; *s; s++)
        if (*s != '*')
            *q++ = *s;
    *q = '\0';
    return d;
}

bool tmm_ifeval_follows_loose(const tmm_ifeval_rule *r, const char *response)
{
    /* r.split("\n"): the first and last lines */
    const char *first_nl = strchr(response, '\n'), *last_nl = strrchr(response, '\n');
    size_t n = strlen(response);
    char *v[8] = { 0 };
    v[0] = strdup(response);
    v[2] = first_nl ? strip(first_nl + 1, n - (size_t)(first_nl + 1 - response)) : strdup("");  /* remove first */
    v[3] = last_nl ? strip(response, (size_t)(last_nl - response)) : strdup("");                  /* remove last */
    v[4] = first_nl && last_nl != first_nl ? strip(first_nl + 1, (size_t)(last_nl - first_nl - 1)) : strdup("");
    v[1] = v[0] ? without_stars(v[0]) : NULL;
    for (int i = 0; i < 3; i++)
        v[5 + i] = v[2 + i] ? without_stars(v[2 + i]) : NULL;
    bool ok = false;
    for (int i = 0; i < 8 && !ok; i++)
        ok = v[i] && tmm_ifeval_follows(r, v[i]);
    for (int i = 0; i < 8; i++)
        free(v[i]);
    return ok;
}
