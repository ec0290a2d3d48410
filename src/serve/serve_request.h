/* Requests of the OpenAI API, parsed and checked (docs/serve.md): POST
 * /v1/completions and /v1/chat/completions bodies into one struct. Nothing
 * in a body is trusted: malformed JSON, a wrong type, a value out of range,
 * a duplicate key or an unknown field is a 400 error with a message that
 * names the field (the `param` of OpenAI's error object). The chat template
 * (serve_chat_render) is here too: what a conversation becomes as a prompt. */
#ifndef TMM_SERVE_REQUEST_H
#define TMM_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/serve_text.h"
#include "status.h" /* TMM_PRINTF */

#define SERVE_MAX_CHOICES 64   /* prompts x n of one request */
#define SERVE_MAX_TOP 20       /* log-probabilities of the most likely tokens, per token */
#define SERVE_MAX_MESSAGES 4096

typedef enum serve_kind { SERVE_COMPLETION, SERVE_CHAT } serve_kind;

/* An error in OpenAI's shape: the HTTP status, and the error object's
 * message, type ("invalid_request_error", ...), param and code (NULL: null). */
typedef struct serve_error {
    int status;
    const char *type;
    const char *code;
    char param[64];
    char message[400];
} serve_error;

/* Fills e and returns false (for `return serve_err(...)`). */
bool serve_err(serve_error *e, int status, const char *type, const char *code, const char *param,
               const char *fmt, ...) TMM_PRINTF(6, 7);
/* A 400 invalid_request_error naming param. */
#define serve_bad(e, param, ...) serve_err(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

/* One prompt: text to tokenize, or the token ids themselves. */
typedef struct serve_prompt {
    char *text;
    size_t length;
    uint32_t *tokens; /* given as ids (then text is NULL) */
    uint32_t count;
} serve_prompt;

typedef struct serve_request {
    serve_kind kind;
    char *model;
    serve_prompt *prompts;  /* chat: one, the rendered conversation */
    uint32_t n_prompts;
    uint32_t n;             /* choices per prompt */
    bool stream, include_usage;
    bool has_max_tokens;
    uint32_t max_tokens;
    float temperature, top_p;
    uint32_t top_k;
    bool has_seed;
    uint64_t seed;
    bool logprobs;          /* completions: "logprobs": N given; chat: "logprobs": true */
    uint32_t top_logprobs;  /* alternatives per token (completions: N) */
    bool echo;
    serve_stops stops;      /* chat: the template's own stop comes last */
} serve_request;

/* Parses and checks a body of `length` bytes (need not be NUL-terminated);
 * vocab bounds token-id prompts. false with *e filled on any fault. */
bool serve_request_parse(serve_kind kind, const char *body, size_t length, uint32_t vocab, serve_request *out,
                         serve_error *e);
void serve_request_free(serve_request *r);

/* The chat template (docs/serve.md "Chat"): each message as "Role: content\n"
 * (System, User, Assistant), then "Assistant:"; generation stops at
 * SERVE_CHAT_STOP, where the model would begin the user's next turn. */
#define SERVE_CHAT_STOP "\nUser:"

#endif
