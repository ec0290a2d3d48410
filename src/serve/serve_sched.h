/* Continuous batching (docs/serve.md "Scheduling"): one thread owns the
 * generator and its `batch` slots. Each turn it admits waiting sequences
 * into free slots, prefills each one's prompt in one pass into its slot
 * (tmm_gen_prefill_slot: the other slots keep their state), then runs one
 * decode step for every slot, each fed its last sampled token. So a new
 * request is prefilled while the others keep decoding, and a finished or
 * abandoned sequence frees its slot at once.
 *
 * Each sequence samples with its own sampler (seed, and the draw number of
 * its token), and the step computes every row from that row's tokens alone:
 * a sequence's tokens do not depend on its neighbours or its slot.
 *
 * A job is one request's sequences (prompts x n). The HTTP side fills it,
 * submits it, waits on it, reads what it has produced so far under the
 * scheduler's lock, and frees it once serve_sched_release has returned. */
#ifndef TMM_SERVE_SCHED_H
#define TMM_SERVE_SCHED_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gen/generator.h"
#include "serve/serve_metrics.h"
#include "serve/serve_request.h"
#include "serve/serve_text.h"

/* One token of the output with its log-probabilities (when asked for). */
typedef struct serve_entry {
    uint32_t token;
    float logprob;        /* NAN: none (a prompt's first token) */
    uint32_t offset;      /* its text's first byte in the returned text */
    uint32_t n_top;
    uint32_t top[SERVE_MAX_TOP];
    float top_logprob[SERVE_MAX_TOP];
} serve_entry;

typedef struct serve_job serve_job;

typedef struct serve_seq {
    serve_job *job;
    uint32_t *prompt;     /* owned */
    uint32_t prompt_len;
    uint32_t max_tokens;  /* what this sequence may generate (the context may end it sooner) */
    tmm_sampler sampler;
    /* the scheduler's */
    uint32_t fed, generated, last, slot;
    uint32_t text_bytes;  /* bytes of the returned text so far (echo and generated) */
    size_t published;     /* text.all[0, published) is in out */
    serve_text text;
    double t_first, t_last;
    struct serve_seq *next; /* the queue */
    bool queued, in_slot;
    /* shared, under the lock */
    tmm_bytes out;        /* the text released so far (the echoed prompt first) */
    serve_entry *entries;
    uint32_t n_entries, cap_entries;
    uint32_t completion_tokens;
    bool done;
    const char *finish;   /* "stop" or "length"; NULL while running or after an error */
} serve_seq;

struct serve_job {
    serve_seq *seqs;
    uint32_t n_seqs;
    bool logprobs, echo;
    uint32_t top_logprobs;
    serve_stops stops;
    double t_submit;
    /* shared, under the lock */
    pthread_cond_t cv;    /* signalled whenever any of its sequences changes */
    uint64_t version;     /* counts those changes */
    uint32_t live;        /* sequences queued or in a slot */
    bool cancelled;
    char error[300];      /* a failure of the generator: every sequence ended with it */
};

typedef struct serve_sched serve_sched;

/* Starts the thread. The generator's batch is the slot count; it must stay
 * alive until serve_sched_destroy. */
tmm_status serve_sched_create(tmm_generator *gen, serve_metrics *metrics, uint32_t queue_limit,
                              serve_sched **out);
/* Stops the thread: sequences still queued or running end with an error
 * ("the server is shutting down") and their waiters wake; jobs may still
 * be waited on, cancelled and read until serve_sched_destroy. Idempotent. */
void serve_sched_stop(serve_sched *s);
/* Stops (if not yet) and frees. */
void serve_sched_destroy(serve_sched *s);

/* A job whose sequences have prompts, max_tokens and samplers. Sets up the
 * rest (its condition variable too); free it with serve_job_free. */
tmm_status serve_job_init(serve_job *job);
void serve_job_free(serve_job *job);

typedef enum serve_submit_result {
    SERVE_SUBMITTED,
    SERVE_QUEUE_FULL,  /* not now: the slots and the queue are taken */
    SERVE_TOO_BIG,     /* never: more sequences than slots + queue */
    SERVE_DRAINING,
} serve_submit_result;
/* Queues the job's sequences (those with nothing to do end at once). */
serve_submit_result serve_sched_submit(serve_sched *s, serve_job *job);
/* Waits until the job has changed since version *seen or timeout_ms has
 * passed, and updates *seen; true when all its sequences are done. */
bool serve_sched_wait(serve_sched *s, serve_job *job, uint64_t *seen, int timeout_ms);
/* Stops the job's sequences that have not ended (their slots free at the
 * next step) and waits until the scheduler holds none of them. */
void serve_sched_cancel(serve_sched *s, serve_job *job);
/* The scheduler's lock, to read a job's shared fields. */
void serve_sched_lock(serve_sched *s);
void serve_sched_unlock(serve_sched *s);
/* Refuses new jobs from now on (SIGTERM). */
void serve_sched_drain(serve_sched *s);
/* Sequences waiting, slots busy. */
void serve_sched_load(serve_sched *s, uint32_t *queued, uint32_t *busy);
/* Seconds a sequence waits per queued sequence ahead of it, for Retry-After. */
uint32_t serve_sched_retry_after(serve_sched *s);

/* The text of one token, *bytes pointing into scratch (which grows for long
 * BPE tokens); the end-of-text token has none. */
tmm_status serve_token_text(tmm_generator *g, tmm_bytes *scratch, uint32_t token, const char **bytes, size_t *len);

/* The log-probabilities of row `logits` [vocab]: of token `token` and of the
 * n_top most likely tokens (ties: lower token first). */
void serve_logprobs(const float *logits, uint32_t vocab, uint32_t token, uint32_t n_top, serve_entry *e);

#endif
