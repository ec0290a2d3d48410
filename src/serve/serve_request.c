/* Parsing and checking the API's request bodies (serve_request.h). */
#include "serve/serve_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "status.h"

bool serve_err(serve_error *e, int status, const char *type, const char *code, const char *param, const char *fmt,
               ...)
{
    e->status = status, e->type = type, e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    for (char *c = e->message; *c; c++) /* one line, whatever a field name holds */
        if ((unsigned char)*c < 0x20)
            *c = ' ';
    return false;
}

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "an unknown value";
}

static bool want(serve_error *e, const char *key, const char *what, const cJSON *v)
{
    return serve_bad(e, key, "Invalid type for '%s': expected %s, but got %s instead.", key, what, type_name(v));
}

/* An integer in [lo, hi] (a JSON number without a fraction). */
static bool get_int(serve_error *e, const char *key, const cJSON *v, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || !isfinite(v->valuedouble))
        return want(e, key, "an integer", v);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return serve_bad(e, key, "Invalid '%s': %.17g is out of range; expected %.17g to %.17g.", key, v->valuedouble,
                         lo, hi);
    *out = v->valuedouble;
    return true;
}

static bool get_u32(serve_error *e, const char *key, const cJSON *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    double d;
    if (!get_int(e, key, v, lo, hi, &d))
        return false;
    *out = (uint32_t)d;
    return true;
}

static bool get_num(serve_error *e, const char *key, const cJSON *v, double lo, double hi, float *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return want(e, key, "a number", v);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return serve_bad(e, key, "Invalid '%s': %.9g is out of range; expected %g to %g.", key, v->valuedouble, lo,
                         hi);
    *out = (float)v->valuedouble;
    return true;
}

static bool get_bool(serve_error *e, const char *key, const cJSON *v, bool *out)
{
    if (!cJSON_IsBool(v))
        return want(e, key, "a boolean", v);
    *out = cJSON_IsTrue(v);
    return true;
}

static bool no_duplicates(serve_error *e, const cJSON *obj, const char *where)
{
    const char *dup = tmm_json_duplicate_key(obj);
    if (dup)
        return serve_bad(e, where, "Duplicate key '%s' in %s.", dup, where);
    return true;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static bool oom(serve_error *e) { return serve_err(e, 500, "server_error", NULL, NULL, "The server is out of memory."); }

/* ---- prompts ---------------------------------------------------------------- */

static bool add_prompt(serve_request *r, serve_error *e, serve_prompt p)
{
    if (r->n_prompts == SERVE_MAX_CHOICES) {
        free(p.text), free(p.tokens);
        return serve_bad(e, "prompt", "Too many prompts: at most %d in one request.", SERVE_MAX_CHOICES);
    }
    serve_prompt *all = realloc(r->prompts, (r->n_prompts + 1) * sizeof *all);
    if (!all) {
        free(p.text), free(p.tokens);
        return oom(e);
    }
    r->prompts = all;
    r->prompts[r->n_prompts++] = p;
    return true;
}

static bool text_prompt(serve_request *r, serve_error *e, const char *s)
{
    serve_prompt p = { .length = strlen(s) };
    p.text = dup_bytes(s, p.length);
    return p.text ? add_prompt(r, e, p) : oom(e);
}

/* An array of token ids. */
static bool token_prompt(serve_request *r, serve_error *e, const cJSON *arr, uint32_t vocab)
{
    const int n = cJSON_GetArraySize(arr);
    if (n == 0)
        return serve_bad(e, "prompt", "A prompt of token ids must hold at least one id.");
    serve_prompt p = { .count = (uint32_t)n };
    p.tokens = malloc((size_t)n * sizeof *p.tokens);
    if (!p.tokens)
        return oom(e);
    uint32_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr)
    {
        if (!get_u32(e, "prompt", v, 0, vocab - 1, &p.tokens[i++])) {
            free(p.tokens);
            return false;
        }
    }
    return add_prompt(r, e, p);
}

static bool parse_prompt(serve_request *r, serve_error *e, const cJSON *v, uint32_t vocab)
{
    if (cJSON_IsString(v))
        return text_prompt(r, e, v->valuestring);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return serve_bad(e, "prompt", "Invalid 'prompt': expected a string, an array of strings, an array of token "
                         "ids or an array of arrays of token ids, but got %s%s.", type_name(v),
                         cJSON_IsArray(v) ? " that is empty" : "");
    const cJSON *first = v->child;
    if (cJSON_IsNumber(first))
        return token_prompt(r, e, v, vocab);
    const cJSON *x;
    cJSON_ArrayForEach(x, v)
    {
        if (cJSON_IsString(first) && cJSON_IsString(x)) {
            if (!text_prompt(r, e, x->valuestring))
                return false;
        } else if (cJSON_IsArray(first) && cJSON_IsArray(x)) {
            if (!token_prompt(r, e, x, vocab))
                return false;
        } else {
            return serve_bad(e, "prompt", "Invalid 'prompt': its elements must all be strings or all be arrays of "
                             "token ids, but one is %s.", type_name(x));
        }
    }
    return true;
}

/* ---- stop sequences ----------------------------------------------------------- */

static bool add_stop(serve_stops *s, serve_error *e, const char *text)
{
    const size_t n = strlen(text);
    if (n == 0)
        return true; /* stops nothing */
    if (n > SERVE_MAX_STOP_BYTES)
        return serve_bad(e, "stop", "A stop sequence may be at most %d bytes long.", SERVE_MAX_STOP_BYTES);
    if (s->count == SERVE_MAX_STOP)
        return serve_bad(e, "stop", "At most %d stop sequences are allowed.", SERVE_MAX_STOP);
    if (!(s->s[s->count] = dup_bytes(text, n)))
        return oom(e);
    s->len[s->count++] = n;
    return true;
}

static bool parse_stop(serve_request *r, serve_error *e, const cJSON *v)
{
    if (cJSON_IsString(v))
        return add_stop(&r->stops, e, v->valuestring);
    if (!cJSON_IsArray(v))
        return want(e, "stop", "a string or an array of strings", v);
    if (cJSON_GetArraySize(v) > SERVE_MAX_STOP)
        return serve_bad(e, "stop", "At most %d stop sequences are allowed.", SERVE_MAX_STOP);
    const cJSON *x;
    cJSON_ArrayForEach(x, v)
    {
        if (!cJSON_IsString(x))
            return want(e, "stop", "an array of strings", x);
        if (!add_stop(&r->stops, e, x->valuestring))
            return false;
    }
    return true;
}

/* ---- chat ----------------------------------------------------------------------- */

static bool append(tmm_bytes *b, serve_error *e, const char *s, size_t n)
{
    return tmm_bytes_append(b, s, n) == TMM_OK ? true : oom(e);
}

/* One message's content: a string, or an array of text parts. */
static bool append_content(tmm_bytes *b, serve_error *e, const cJSON *c, bool may_be_null)
{
    if (cJSON_IsString(c))
        return append(b, e, c->valuestring, strlen(c->valuestring));
    if (cJSON_IsNull(c) && may_be_null)
        return true;
    if (!cJSON_IsArray(c))
        return want(e, "messages", "a message content that is a string or an array of text parts", c);
    const cJSON *part;
    cJSON_ArrayForEach(part, c)
    {
        if (!cJSON_IsObject(part))
            return want(e, "messages", "a content part that is an object", part);
        if (!no_duplicates(e, part, "messages"))
            return false;
        const cJSON *type = NULL, *text = NULL, *f;
        cJSON_ArrayForEach(f, part)
        {
            if (strcmp(f->string, "type") == 0)
                type = f;
            else if (strcmp(f->string, "text") == 0)
                text = f;
            else
                return serve_bad(e, "messages", "Unrecognized field '%s' in a content part: only text parts "
                                 "({\"type\": \"text\", \"text\": ...}) are supported.", f->string);
        }
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
            return serve_bad(e, "messages", "Only content parts of type 'text' are supported.");
        if (!cJSON_IsString(text))
            return want(e, "messages", "a text part whose 'text' is a string", text ? text : part);
        if (!append(b, e, text->valuestring, strlen(text->valuestring)))
            return false;
    }
    return true;
}

static bool render_message(tmm_bytes *b, serve_error *e, const cJSON *m)
{
    if (!cJSON_IsObject(m))
        return want(e, "messages", "each message to be an object", m);
    if (!no_duplicates(e, m, "messages"))
        return false;
    const cJSON *role = NULL, *content = NULL, *f;
    cJSON_ArrayForEach(f, m)
    {
        if (strcmp(f->string, "role") == 0)
            role = f;
        else if (strcmp(f->string, "content") == 0)
            content = f;
        else if (strcmp(f->string, "name") == 0) {
            if (!cJSON_IsString(f))
                return want(e, "messages", "a message 'name' that is a string", f);
        } else
            return serve_bad(e, "messages", "Unrecognized field '%s' in a message (tmm serve takes role, content "
                             "and name).", f->string);
    }
    if (!cJSON_IsString(role))
        return serve_bad(e, "messages", "Each message needs a 'role' that is a string.");
    static const struct { const char *role, *label; } roles[] = {
        { "system", "System" }, { "developer", "System" }, { "user", "User" }, { "assistant", "Assistant" },
    };
    const char *label = NULL;
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role->valuestring, roles[i].role) == 0)
            label = roles[i].label;
    if (!label)
        return serve_bad(e, "messages", "Unsupported message role '%.40s': tmm serve takes system, developer, user "
                         "and assistant.", role->valuestring);
    if (!content)
        return serve_bad(e, "messages", "Each message needs a 'content'.");
    return append(b, e, label, strlen(label)) && append(b, e, ": ", 2) &&
           append_content(b, e, content, strcmp(label, "Assistant") == 0) && append(b, e, "\n", 1);
}

static bool parse_messages(serve_request *r, serve_error *e, const cJSON *v)
{
    if (!cJSON_IsArray(v))
        return want(e, "messages", "an array", v);
    const int n = cJSON_GetArraySize(v);
    if (n == 0)
        return serve_bad(e, "messages", "'messages' must hold at least one message.");
    if (n > SERVE_MAX_MESSAGES)
        return serve_bad(e, "messages", "Too many messages: at most %d.", SERVE_MAX_MESSAGES);
    tmm_bytes b = { 0 };
    const cJSON *m;
    bool ok = true;
    cJSON_ArrayForEach(m, v)
    {
        if (ok)
            ok = render_message(&b, e, m);
    }
    ok = ok && append(&b, e, "Assistant:", strlen("Assistant:")) && append(&b, e, "", 1);
    serve_prompt p = { .text = b.data, .length = b.length - 1 }; /* NUL-terminated too */
    if (!ok) {
        free(b.data);
        return false;
    }
    return add_prompt(r, e, p);
}

/* ---- the body -------------------------------------------------------------------- */

/* Known fields that tmm serve does not implement: a clearer word than "unrecognized". */
static const char *const unsupported[] = {
    "tools", "tool_choice", "functions", "function_call", "response_format", "parallel_tool_calls", "audio",
    "modalities", "prediction", "reasoning_effort", "service_tier", "store", "metadata", "web_search_options",
};

/* null for an optional field means its default; for a field of the other
 * endpoint or an unknown one it is still refused. */
static bool null_field(const serve_request *r, serve_error *e, const char *k)
{
    static const char *const nullable[] = {
        "max_tokens", "temperature", "top_p", "top_k", "n", "stream", "stream_options", "seed", "stop", "user",
        "presence_penalty", "frequency_penalty", "logit_bias",
    };
    static const char *const nullable_completion[] = { "logprobs", "echo", "suffix", "best_of" };
    static const char *const nullable_chat[] = { "max_completion_tokens", "logprobs", "top_logprobs" };
    for (size_t i = 0; i < sizeof nullable / sizeof nullable[0]; i++)
        if (strcmp(k, nullable[i]) == 0)
            return true;
    const bool chat = r->kind == SERVE_CHAT;
    const char *const *more = chat ? nullable_chat : nullable_completion;
    const size_t n_more = chat ? sizeof nullable_chat / sizeof *more : sizeof nullable_completion / sizeof *more;
    for (size_t i = 0; i < n_more; i++)
        if (strcmp(k, more[i]) == 0)
            return true;
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (strcmp(k, unsupported[i]) == 0)
            return true;
    return serve_bad(e, k, "Unrecognized request argument supplied: %s", k);
}

static bool field(serve_request *r, serve_error *e, const cJSON *v, uint32_t vocab, bool *max_given)
{
    const char *k = v->string;
    const bool chat = r->kind == SERVE_CHAT;
    if (strcmp(k, "model") == 0) {
        if (!cJSON_IsString(v))
            return want(e, k, "a string", v);
        return (r->model = dup_bytes(v->valuestring, strlen(v->valuestring))) ? true : oom(e);
    }
    if (!chat && strcmp(k, "prompt") == 0)
        return cJSON_IsNull(v) || parse_prompt(r, e, v, vocab);
    if (chat && strcmp(k, "messages") == 0)
        return parse_messages(r, e, v);
    if (cJSON_IsNull(v))
        return null_field(r, e, k);
    if (strcmp(k, "max_tokens") == 0 || (chat && strcmp(k, "max_completion_tokens") == 0)) {
        uint32_t m;
        if (!get_u32(e, k, v, chat ? 1 : 0, UINT32_MAX, &m))
            return false;
        if (*max_given && m != r->max_tokens)
            return serve_bad(e, k, "Give max_tokens or max_completion_tokens, not both.");
        *max_given = r->has_max_tokens = true;
        r->max_tokens = m;
        return true;
    }
    if (strcmp(k, "temperature") == 0)
        return get_num(e, k, v, 0, 2, &r->temperature);
    if (strcmp(k, "top_p") == 0)
        return get_num(e, k, v, 0, 1, &r->top_p);
    if (strcmp(k, "top_k") == 0)
        return get_u32(e, k, v, 0, UINT32_MAX, &r->top_k);
    if (strcmp(k, "n") == 0)
        return get_u32(e, k, v, 1, SERVE_MAX_CHOICES, &r->n);
    if (strcmp(k, "stream") == 0)
        return get_bool(e, k, v, &r->stream);
    if (strcmp(k, "stream_options") == 0) {
        if (!cJSON_IsObject(v))
            return want(e, k, "an object", v);
        if (!no_duplicates(e, v, k))
            return false;
        const cJSON *o;
        cJSON_ArrayForEach(o, v)
        {
            if (strcmp(o->string, "include_usage") != 0)
                return serve_bad(e, k, "Unrecognized stream option '%s' (tmm serve takes include_usage).",
                                 o->string);
            if (!cJSON_IsNull(o) && !get_bool(e, "stream_options.include_usage", o, &r->include_usage))
                return false;
        }
        return true;
    }
    if (strcmp(k, "seed") == 0) {
        double d;
        if (!get_int(e, k, v, -9223372036854775808.0, 9223372036854774784.0, &d))
            return false;
        r->has_seed = true;
        r->seed = (uint64_t)(int64_t)d;
        return true;
    }
    if (strcmp(k, "stop") == 0)
        return parse_stop(r, e, v);
    if (!chat && strcmp(k, "logprobs") == 0) {
        r->logprobs = true;
        return get_u32(e, k, v, 0, SERVE_MAX_TOP, &r->top_logprobs);
    }
    if (chat && strcmp(k, "logprobs") == 0)
        return get_bool(e, k, v, &r->logprobs);
    if (chat && strcmp(k, "top_logprobs") == 0)
        return get_u32(e, k, v, 0, SERVE_MAX_TOP, &r->top_logprobs);
    if (!chat && strcmp(k, "echo") == 0)
        return get_bool(e, k, v, &r->echo);
    if (strcmp(k, "user") == 0)
        return cJSON_IsString(v) ? true : want(e, k, "a string", v);
    if (strcmp(k, "presence_penalty") == 0 || strcmp(k, "frequency_penalty") == 0) {
        float p;
        if (!get_num(e, k, v, -2, 2, &p))
            return false;
        return p == 0 ? true : serve_bad(e, k, "'%s' is not supported by tmm serve (only 0).", k);
    }
    if (strcmp(k, "logit_bias") == 0) {
        if (!cJSON_IsObject(v))
            return want(e, k, "an object", v);
        return v->child == NULL ? true : serve_bad(e, k, "'logit_bias' is not supported by tmm serve.");
    }
    if (!chat && strcmp(k, "suffix") == 0) {
        if (!cJSON_IsString(v))
            return want(e, k, "a string", v);
        return v->valuestring[0] == 0 ? true : serve_bad(e, k, "'suffix' is not supported by tmm serve.");
    }
    if (!chat && strcmp(k, "best_of") == 0) {
        uint32_t b;
        if (!get_u32(e, k, v, 1, SERVE_MAX_CHOICES, &b))
            return false;
        return b == 1 ? true : serve_bad(e, k, "'best_of' above 1 is not supported by tmm serve.");
    }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (strcmp(k, unsupported[i]) == 0)
            return serve_bad(e, k, "'%s' is not supported by tmm serve.", k);
    return serve_bad(e, k, "Unrecognized request argument supplied: %s", k);
}

static bool check(serve_request *r, serve_error *e, bool has_prompt, uint32_t vocab)
{
    if (!r->model)
        return serve_bad(e, "model", "You must provide a model parameter.");
    if (r->kind == SERVE_CHAT && r->n_prompts == 0)
        return serve_bad(e, "messages", "Missing required parameter: 'messages'.");
    if (r->kind == SERVE_COMPLETION && !has_prompt && r->n_prompts == 0) {
        /* OpenAI's default prompt: the end of a document, an empty string here */
        if (!text_prompt(r, e, ""))
            return false;
    }
    if ((uint64_t)r->n_prompts * r->n > SERVE_MAX_CHOICES)
        return serve_bad(e, "n", "%u prompts x n = %u is %llu choices; at most %d in one request.", r->n_prompts,
                         r->n, (unsigned long long)r->n_prompts * r->n, SERVE_MAX_CHOICES);
    if (r->include_usage && !r->stream)
        return serve_bad(e, "stream_options", "The 'stream_options' parameter is only allowed when 'stream' is "
                         "enabled.");
    if (r->kind == SERVE_CHAT && r->top_logprobs && !r->logprobs)
        return serve_bad(e, "top_logprobs", "'top_logprobs' needs 'logprobs' to be true.");
    if (r->kind == SERVE_CHAT && r->stops.count < SERVE_MAX_STOP + 1) {
        serve_stops *s = &r->stops;
        if (!(s->s[s->count] = dup_bytes(SERVE_CHAT_STOP, strlen(SERVE_CHAT_STOP))))
            return oom(e);
        s->len[s->count++] = strlen(SERVE_CHAT_STOP);
    }
    (void)vocab;
    return true;
}

bool serve_request_parse(serve_kind kind, const char *body, size_t length, uint32_t vocab, serve_request *r,
                         serve_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    if (vocab == 0)
        return serve_err(e, 500, "server_error", NULL, NULL, "The model has an empty vocabulary.");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, length, &end, false);
    if (!root) {
        const size_t at = end && end >= body && end <= body + length ? (size_t)(end - body) : 0;
        return serve_bad(e, NULL, "We could not parse the JSON body of your request: it is not valid JSON (at byte "
                         "%zu). The OpenAI API expects a JSON payload.", at);
    }
    bool ok = true;
    /* trailing bytes after the value (other than whitespace) */
    for (const char *p = end; ok && p && p < body + length; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            ok = serve_bad(e, NULL, "We could not parse the JSON body of your request: there is text after the "
                           "JSON value (at byte %zu).", (size_t)(p - body));
    if (ok && tmm_json_has_nul_escape(body, length))
        ok = serve_bad(e, NULL, "The request body holds the escape \\u0000 (a NUL character), which tmm does not "
                       "accept in any string: remove it.");
    if (ok && !cJSON_IsObject(root))
        ok = serve_bad(e, NULL, "The request body must be a JSON object, not %s.", type_name(root));
    ok = ok && no_duplicates(e, root, "the request body");
    bool max_given = false, has_prompt = false;
    const cJSON *v;
    if (ok)
        cJSON_ArrayForEach(v, root)
        {
            if (strcmp(v->string, "prompt") == 0 && kind == SERVE_COMPLETION)
                has_prompt = !cJSON_IsNull(v);
            if (!(ok = field(r, e, v, vocab, &max_given)))
                break;
        }
    ok = ok && check(r, e, has_prompt, vocab);
    cJSON_Delete(root);
    if (!ok)
        serve_request_free(r);
    return ok;
}

void serve_request_free(serve_request *r)
{
    for (uint32_t i = 0; i < r->n_prompts; i++)
        free(r->prompts[i].text), free(r->prompts[i].tokens);
    free(r->prompts);
    free(r->model);
    serve_stops_free(&r->stops);
    memset(r, 0, sizeof *r);
}
