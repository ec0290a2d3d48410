/* The API's responses in OpenAI's shapes (docs/serve.md "Responses"):
 * completions and chat completions, whole or as stream chunks, usage,
 * log-probabilities, models, health and errors. */
#ifndef TMM_SERVE_JSON_H
#define TMM_SERVE_JSON_H

#include "serve/serve_jw.h"
#include "serve/serve_request.h"
#include "serve/serve_sched.h"

/* What every response to one request shares. */
typedef struct serve_reply {
    serve_kind kind;
    char id[48];          /* "cmpl-..." or "chatcmpl-..." */
    long long created;    /* Unix seconds */
    const char *model;
    tmm_generator *gen;   /* the tokens' texts */
    bool logprobs;
    bool include_usage;   /* stream: "usage": null in every chunk, then a usage chunk */
} serve_reply;

/* One choice's progress as a stream chunk: text[0, length), entries
 * [0, n_entries), and its finish reason when it ended (NULL: still going);
 * `role` opens a chat stream ({"role": "assistant"}). */
typedef struct serve_delta {
    uint32_t index;
    const char *text;
    size_t length;
    const serve_entry *entries;
    uint32_t n_entries;
    const char *finish;
    bool role;
} serve_delta;

/* The error object: {"error": {"message", "type", "param", "code"}}. */
void serve_json_error(serve_jw *w, const serve_error *e);
/* A whole (non-stream) response from a finished job; prompt_tokens for usage. */
void serve_json_response(serve_jw *w, const serve_reply *r, const serve_job *job, uint64_t prompt_tokens);
/* A stream chunk ("data: {...}\n\n") for one choice. */
void serve_json_chunk(serve_jw *w, const serve_reply *r, const serve_delta *d);
/* The usage chunk that ends a stream with include_usage. */
void serve_json_usage_chunk(serve_jw *w, const serve_reply *r, uint64_t prompt_tokens, uint64_t completion_tokens);
/* GET /v1/models (one = NULL) and /v1/models/{id}. */
void serve_json_models(serve_jw *w, const char *model, long long created, bool one);

#endif
