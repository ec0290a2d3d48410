/* Responses in OpenAI's shapes (serve_json.h). */
#include "serve/serve_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void serve_json_error(serve_jw *w, const serve_error *e)
{
    jw_obj(w);
    jw_key(w, "error");
    jw_obj(w);
    jw_key(w, "message"), jw_cstr(w, e->message);
    jw_key(w, "type"), jw_cstr(w, e->type);
    jw_key(w, "param"), jw_cstr(w, e->param[0] ? e->param : NULL);
    jw_key(w, "code"), jw_cstr(w, e->code);
    jw_end(w);
    jw_end(w);
}

static void token_string(serve_jw *w, const serve_reply *r, tmm_bytes *scratch, uint32_t token, bool as_key)
{
    const char *bytes = "";
    size_t len = 0;
    if (serve_token_text(r->gen, scratch, token, &bytes, &len) != TMM_OK)
        w->failed = true;
    if (as_key)
        jw_key_n(w, bytes, len);
    else
        jw_str(w, bytes, len);
}

static void token_bytes(serve_jw *w, const serve_reply *r, tmm_bytes *scratch, uint32_t token)
{
    const char *bytes = "";
    size_t len = 0;
    if (serve_token_text(r->gen, scratch, token, &bytes, &len) != TMM_OK)
        w->failed = true;
    jw_arr(w);
    for (size_t i = 0; i < len; i++)
        jw_int(w, (unsigned char)bytes[i]);
    jw_end_arr(w);
}

/* Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static void completion_logprobs(serve_jw *w, const serve_reply *r, const serve_entry *e, uint32_t n)
{
    tmm_bytes scratch = { 0 };
    jw_obj(w);
    jw_key(w, "tokens");
    jw_arr(w);
    for (uint32_t i = 0; i < n; i++)
        token_string(w, r, &scratch, e[i].token, false);
    jw_end_arr(w);
    jw_key(w, "token_logprobs");
    jw_arr(w);
    for (uint32_t i = 0; i < n; i++)
        jw_num(w, e[i].logprob);
    jw_end_arr(w);
    jw_key(w, "top_logprobs");
    jw_arr(w);
    for (uint32_t i = 0; i < n; i++) {
        if (isnan(e[i].logprob)) { /* a prompt's first token: nothing before it */
            jw_null(w);
            continue;
        }
        jw_obj(w);
        for (uint32_t k = 0; k < e[i].n_top; k++) {
            token_string(w, r, &scratch, e[i].top[k], true);
            jw_num(w, e[i].top_logprob[k]);
        }
        jw_end(w);
    }
    jw_end_arr(w);
    jw_key(w, "text_offset");
    jw_arr(w);
    for (uint32_t i = 0; i < n; i++)
        jw_int(w, e[i].offset);
    jw_end_arr(w);
    jw_end(w);
    free(scratch.data);
}

/* Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}. */
static void chat_logprobs(serve_jw *w, const serve_reply *r, const serve_entry *e, uint32_t n)
{
    tmm_bytes scratch = { 0 };
    jw_obj(w);
    jw_key(w, "content");
    jw_arr(w);
    for (uint32_t i = 0; i < n; i++) {
        jw_obj(w);
        jw_key(w, "token"), token_string(w, r, &scratch, e[i].token, false);
        jw_key(w, "logprob"), jw_num(w, e[i].logprob);
        jw_key(w, "bytes"), token_bytes(w, r, &scratch, e[i].token);
        jw_key(w, "top_logprobs");
        jw_arr(w);
        for (uint32_t k = 0; k < e[i].n_top; k++) {
            jw_obj(w);
            jw_key(w, "token"), token_string(w, r, &scratch, e[i].top[k], false);
            jw_key(w, "logprob"), jw_num(w, e[i].top_logprob[k]);
            jw_key(w, "bytes"), token_bytes(w, r, &scratch, e[i].top[k]);
            jw_end(w);
        }
        jw_end_arr(w);
        jw_end(w);
    }
    jw_end_arr(w);
    jw_key(w, "refusal"), jw_null(w);
    jw_end(w);
}

static void logprobs(serve_jw *w, const serve_reply *r, const serve_entry *e, uint32_t n)
{
    jw_key(w, "logprobs");
    if (!r->logprobs)
        jw_null(w);
    else if (r->kind == SERVE_CHAT)
        chat_logprobs(w, r, e, n);
    else
        completion_logprobs(w, r, e, n);
}

static void head(serve_jw *w, const serve_reply *r, bool chunk)
{
    jw_key(w, "id"), jw_cstr(w, r->id);
    jw_key(w, "object");
    jw_cstr(w, r->kind == SERVE_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    jw_key(w, "created"), jw_int(w, r->created);
    jw_key(w, "model"), jw_cstr(w, r->model);
    jw_key(w, "system_fingerprint"), jw_cstr(w, "tmm-" TMM_VERSION_STRING);
}

static void usage(serve_jw *w, uint64_t prompt, uint64_t completion)
{
    jw_key(w, "usage");
    jw_obj(w);
    jw_key(w, "prompt_tokens"), jw_int(w, (int64_t)prompt);
    jw_key(w, "completion_tokens"), jw_int(w, (int64_t)completion);
    jw_key(w, "total_tokens"), jw_int(w, (int64_t)(prompt + completion));
    jw_end(w);
}

void serve_json_response(serve_jw *w, const serve_reply *r, const serve_job *job, uint64_t prompt_tokens)
{
    uint64_t completion = 0;
    jw_obj(w);
    head(w, r, false);
    jw_key(w, "choices");
    jw_arr(w);
    for (uint32_t i = 0; i < job->n_seqs; i++) {
        const serve_seq *q = &job->seqs[i];
        completion += q->completion_tokens;
        jw_obj(w);
        jw_key(w, "index"), jw_int(w, i);
        if (r->kind == SERVE_CHAT) {
            jw_key(w, "message");
            jw_obj(w);
            jw_key(w, "role"), jw_cstr(w, "assistant");
            jw_key(w, "content"), jw_str(w, q->out.data ? q->out.data : "", q->out.length);
            jw_key(w, "refusal"), jw_null(w);
            jw_end(w);
        } else {
            jw_key(w, "text"), jw_str(w, q->out.data ? q->out.data : "", q->out.length);
        }
        logprobs(w, r, q->entries, q->n_entries);
        jw_key(w, "finish_reason"), jw_cstr(w, q->finish ? q->finish : "length");
        jw_end(w);
    }
    jw_end_arr(w);
    usage(w, prompt_tokens, completion);
    jw_end(w);
}

void serve_json_chunk(serve_jw *w, const serve_reply *r, const serve_delta *d)
{
    jw_raw(w, "data: ");
    jw_obj(w);
    head(w, r, true);
    jw_key(w, "choices");
    jw_arr(w);
    jw_obj(w);
    jw_key(w, "index"), jw_int(w, d->index);
    if (r->kind == SERVE_CHAT) {
        jw_key(w, "delta");
        jw_obj(w);
        if (d->role)
            jw_key(w, "role"), jw_cstr(w, "assistant");
        if (d->length || d->role)
            jw_key(w, "content"), jw_str(w, d->text ? d->text : "", d->length);
        jw_end(w);
    } else {
        jw_key(w, "text"), jw_str(w, d->text ? d->text : "", d->length);
    }
    if (r->logprobs && d->n_entries == 0) {
        jw_key(w, "logprobs"), jw_null(w);
    } else {
        logprobs(w, r, d->entries, d->n_entries);
    }
    jw_key(w, "finish_reason"), jw_cstr(w, d->finish);
    jw_end(w);
    jw_end_arr(w);
    if (r->include_usage)
        jw_key(w, "usage"), jw_null(w);
    jw_end(w);
    jw_raw(w, "\n\n");
}

void serve_json_usage_chunk(serve_jw *w, const serve_reply *r, uint64_t prompt_tokens, uint64_t completion_tokens)
{
    jw_raw(w, "data: ");
    jw_obj(w);
    head(w, r, true);
    jw_key(w, "choices");
    jw_arr(w);
    jw_end_arr(w);
    usage(w, prompt_tokens, completion_tokens);
    jw_end(w);
    jw_raw(w, "\n\n");
}

static void model_object(serve_jw *w, const char *model, long long created)
{
    jw_obj(w);
    jw_key(w, "id"), jw_cstr(w, model);
    jw_key(w, "object"), jw_cstr(w, "model");
    jw_key(w, "created"), jw_int(w, created);
    jw_key(w, "owned_by"), jw_cstr(w, "tmm");
    jw_end(w);
}

void serve_json_models(serve_jw *w, const char *model, long long created, bool one)
{
    if (one) {
        model_object(w, model, created);
        return;
    }
    jw_obj(w);
    jw_key(w, "object"), jw_cstr(w, "list");
    jw_key(w, "data");
    jw_arr(w);
    model_object(w, model, created);
    jw_end_arr(w);
    jw_end(w);
}
