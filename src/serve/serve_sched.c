/* The scheduler thread: continuous batching over the generator's slots (serve_sched.h). */
#include "serve/serve_sched.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct serve_sched {
    tmm_generator *gen;
    serve_metrics *metrics;
    uint32_t B, V, n_ctx, eot, queue_limit;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop, draining;
    serve_seq *head, *tail;   /* the queue, first come first served */
    uint32_t queued, busy;
    serve_seq **slot;         /* [B]: the sequence in each slot, or NULL */
    bool *restart;            /* [B]: idle slots to bring back to position 0 */
    bool *admitted;           /* [B]: slots filled this turn, to prefill */
    uint32_t *tokens;         /* [B] */
    float *logits;            /* [B, V] */
    float *rows;              /* a prefill's rows of logits [rows_cap, V] */
    uint32_t rows_cap;
    tmm_bytes scratch;        /* one token's text */
    double seq_seconds;       /* a sequence's time in its slot, averaged (Retry-After) */
};

/* What one step did to one slot: computed outside the lock, published under it. */
typedef struct stage {
    bool entry_set, token, first;
    serve_entry entry;
    const char *finish;
    char error[200];
} stage;

/* ---- log-probabilities ---------------------------------------------------------- */

void serve_logprobs(const float *logits, uint32_t vocab, uint32_t token, uint32_t n_top, serve_entry *e)
{
    double top = logits[0];
    for (uint32_t i = 1; i < vocab; i++)
        top = logits[i] > top ? logits[i] : top;
    double sum = 0;
    for (uint32_t i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - top);
    const double lse = top + log(sum);
    e->token = token;
    e->logprob = (float)((double)logits[token] - lse);
    n_top = n_top < vocab ? n_top : vocab;
    n_top = n_top < SERVE_MAX_TOP ? n_top : SERVE_MAX_TOP;
    e->n_top = 0;
    for (uint32_t i = 0; i < vocab; i++) { /* insertion into the n_top best, most likely first */
        uint32_t at = e->n_top;
        while (at > 0 && logits[e->top[at - 1]] < logits[i])
            at--;
        if (at >= n_top)
            continue;
        const uint32_t last = e->n_top < n_top ? e->n_top : n_top - 1;
        for (uint32_t k = last; k > at; k--)
            e->top[k] = e->top[k - 1];
        e->top[at] = i;
        if (e->n_top < n_top)
            e->n_top++;
    }
    for (uint32_t k = 0; k < e->n_top; k++)
        e->top_logprob[k] = (float)((double)logits[e->top[k]] - lse);
}

/* ---- jobs ---------------------------------------------------------------------------- */

tmm_status serve_job_init(serve_job *job)
{
    if (pthread_cond_init(&job->cv, NULL) != 0)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "cannot make a condition variable");
    for (uint32_t i = 0; i < job->n_seqs; i++)
        job->seqs[i].job = job;
    return TMM_OK;
}

void serve_job_free(serve_job *job)
{
    if (!job)
        return;
    for (uint32_t i = 0; job->seqs && i < job->n_seqs; i++) {
        serve_seq *q = &job->seqs[i];
        free(q->prompt), free(q->out.data), free(q->entries);
        serve_text_free(&q->text);
    }
    free(job->seqs);
    serve_stops_free(&job->stops);
    pthread_cond_destroy(&job->cv);
    free(job);
}

static tmm_status reserve(tmm_bytes *b, size_t n)
{
    if (b->capacity >= n)
        return TMM_OK;
    char *p = realloc(b->data, n);
    if (!p)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    b->data = p, b->capacity = n;
    return TMM_OK;
}

tmm_status serve_token_text(tmm_generator *g, tmm_bytes *scratch, uint32_t token, const char **bytes, size_t *len)
{
    TMM_TRY(reserve(scratch, 64));
    size_t n = tmm_detokenize(g, token, scratch->data, scratch->capacity);
    if (n >= scratch->capacity) { /* a long BPE token */
        TMM_TRY(reserve(scratch, n + 1));
        n = tmm_detokenize(g, token, scratch->data, scratch->capacity);
    }
    *bytes = scratch->data, *len = n;
    return TMM_OK;
}

static tmm_status push_entry(serve_seq *q, const serve_entry *e)
{
    if (q->n_entries == q->cap_entries) {
        const uint32_t cap = q->cap_entries ? 2 * q->cap_entries : 16;
        serve_entry *all = realloc(q->entries, cap * sizeof *all);
        if (!all)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        q->entries = all, q->cap_entries = cap;
    }
    q->entries[q->n_entries++] = *e;
    return TMM_OK;
}

/* ---- the scheduler's own steps (the thread) ----------------------------------------- */

/* Ends sequence q (lock held): out of its slot or the queue, its waiters woken. */
static void end_seq(serve_sched *s, serve_seq *q, const char *finish, const char *error)
{
    serve_job *j = q->job;
    if (q->in_slot) {
        s->slot[q->slot] = NULL;
        s->busy--;
        q->in_slot = false;
        const double now = serve_now();
        serve_metrics_finished(s->metrics, now - j->t_submit, finish == NULL && !error);
        s->seq_seconds = s->seq_seconds == 0 ? now - j->t_submit : 0.8 * s->seq_seconds + 0.2 * (now - j->t_submit);
    }
    if (error && !j->error[0])
        snprintf(j->error, sizeof j->error, "%s", error);
    q->finish = finish;
    q->done = true;
    j->live--;
    j->version++;
    pthread_cond_broadcast(&j->cv);
}

/* Frees the slots of cancelled jobs, and fills free slots from the queue (lock held). */
static void reap_and_admit(serve_sched *s)
{
    for (uint32_t b = 0; b < s->B; b++)
        if (s->slot[b] && s->slot[b]->job->cancelled)
            end_seq(s, s->slot[b], NULL, NULL);
    for (uint32_t b = 0; b < s->B && s->head; b++) {
        if (s->slot[b])
            continue;
        serve_seq *q = s->head;
        s->head = q->next;
        if (!s->head)
            s->tail = NULL;
        q->next = NULL;
        q->queued = false;
        s->queued--;
        q->in_slot = true;
        q->slot = b;
        s->slot[b] = q;
        s->busy++;
        s->admitted[b] = true;
    }
    serve_metrics_gauges(s->metrics, s->queued, s->busy);
}

/* One step's consequence for the sequence in slot b, whose row of logits is `row`. */
static tmm_status advance(serve_sched *s, uint32_t b, const float *row, double now, stage *st)
{
    serve_seq *q = s->slot[b];
    serve_job *j = q->job;
    const char *bytes;
    size_t len;
    if (q->fed < q->prompt_len) {
        q->fed++;
        if (q->fed < q->prompt_len) { /* still reading the prompt: the next prompt token's log-probability */
            if (j->echo && j->logprobs) {
                serve_logprobs(row, s->V, q->prompt[q->fed], j->top_logprobs, &st->entry);
                st->entry.offset = q->text_bytes;
                st->entry_set = true;
                TMM_TRY(serve_token_text(s->gen, &s->scratch, q->prompt[q->fed], &bytes, &len));
                q->text_bytes += (uint32_t)len;
            }
            return TMM_OK;
        }
        if (q->max_tokens == 0) { /* echo with log-probabilities only */
            st->finish = "length";
            return TMM_OK;
        }
    }
    uint32_t tok;
    TMM_TRY(tmm_sample(&q->sampler, row, s->V, q->generated, &tok));
    q->generated++;
    st->token = true;
    st->first = q->generated == 1;
    if (!st->first)
        serve_metrics_itl(s->metrics, now - q->t_last);
    else
        q->t_first = now;
    q->t_last = now;
    if (j->logprobs) {
        serve_logprobs(row, s->V, tok, j->top_logprobs, &st->entry);
        st->entry.offset = q->text_bytes;
        st->entry_set = true;
    }
    if (tok == s->eot) {
        st->finish = "stop";
    } else {
        TMM_TRY(serve_token_text(s->gen, &s->scratch, tok, &bytes, &len));
        q->text_bytes += (uint32_t)len;
        TMM_TRY(serve_text_append(&q->text, &j->stops, bytes, len));
        if (q->text.stopped)
            st->finish = "stop";
        else if (q->generated >= q->max_tokens || tmm_generator_position(s->gen, b) >= s->n_ctx)
            st->finish = "length";
        q->last = tok;
    }
    if (st->finish)
        serve_text_finish(&q->text);
    return TMM_OK;
}

/* Publishes what a step did to slot b (lock held). */
static void publish(serve_sched *s, uint32_t b, const stage *st)
{
    serve_seq *q = s->slot[b];
    serve_job *j = q->job;
    const char *error = st->error[0] ? st->error : NULL;
    if (!error && st->entry_set && push_entry(q, &st->entry) != TMM_OK)
        error = "out of host memory";
    if (!error && q->text.committed > q->published) {
        if (tmm_bytes_append(&q->out, q->text.all.data + q->published, q->text.committed - q->published) != TMM_OK)
            error = "out of host memory";
        q->published = q->text.committed;
    }
    if (st->token)
        q->completion_tokens++;
    if (st->first)
        serve_metrics_first_token(s->metrics, q->t_first - j->t_submit);
    if (error || st->finish) {
        end_seq(s, q, error ? NULL : st->finish, error);
    } else if (st->entry_set || st->token) {
        j->version++;
        pthread_cond_broadcast(&j->cv);
    }
}

/* Ends every sequence in a slot (lock held). */
static void fail_active(serve_sched *s, const char *error)
{
    for (uint32_t b = 0; b < s->B; b++)
        if (s->slot[b])
            end_seq(s, s->slot[b], NULL, error);
}

/* Publishes stage st of slot b, whose sequence is q, under the lock: false
 * when that ended it. */
static bool publish_one(serve_sched *s, uint32_t b, const serve_seq *q, const stage *st)
{
    pthread_mutex_lock(&s->lock);
    publish(s, b, st);
    const bool going = s->slot[b] == q;
    pthread_mutex_unlock(&s->lock);
    return going;
}

/* The prompts of the sequences admitted this turn, each in one pass into
 * its slot (tmm_gen_prefill_slot) while the other slots keep their state:
 * the rows of its positions give the echoed prompt's log-probabilities (when
 * asked for) and the last one the first token. Runs without the lock, as
 * the step does; takes it to publish. */
static void prefill_admitted(serve_sched *s, stage *st)
{
    for (uint32_t b = 0; b < s->B; b++) {
        serve_seq *q = s->slot[b];
        if (!s->admitted[b] || !q)
            continue;
        s->admitted[b] = false;
        const uint32_t len = q->prompt_len, from = q->job->echo && q->job->logprobs ? 0 : len - 1;
        const double t0 = serve_now();
        tmm_status rc = TMM_OK;
        if (len - from > s->rows_cap) {
            float *rows = realloc(s->rows, (size_t)(len - from) * s->V * sizeof *rows);
            rc = rows ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            if (rows)
                s->rows = rows, s->rows_cap = len - from;
        }
        if (rc == TMM_OK)
            rc = tmm_gen_prefill_slot(s->gen, b, q->prompt, len, from, s->rows);
        const double t1 = serve_now();
        uint32_t made = 0;
        q->fed = from; /* each row advances the sequence by one prompt token */
        for (uint32_t r = 0; r < len - from; r++) {
            memset(&st[b], 0, sizeof st[b]);
            if (rc != TMM_OK)
                snprintf(st[b].error, sizeof st[b].error, "the generator failed: %s", tmm_last_error());
            else if (advance(s, b, s->rows + (size_t)r * s->V, t1, &st[b]) != TMM_OK)
                snprintf(st[b].error, sizeof st[b].error, "%s", tmm_last_error());
            made += st[b].token;
            if (!publish_one(s, b, q, &st[b]))
                break;
        }
        serve_metrics_prefill(s->metrics, t1 - t0, made, t1);
    }
}

/* One step of every slot, after restarting the idle ones: an idle slot is
 * kept at position 0, where its exact step costs least (the cached dot
 * product is O(position)); one with a running state (Mamba 2, linear
 * attention, distilled), whose step costs the same anywhere, only before it
 * would reach the context's end and stop the step. */
static tmm_status step(serve_sched *s)
{
    bool any = false;
    const bool running = tmm_gen_running_state(s->gen);
    for (uint32_t b = 0; b < s->B; b++) {
        const uint32_t pos = tmm_generator_position(s->gen, b);
        if (!s->slot[b] && (pos >= s->n_ctx || (!running && pos > 0)))
            s->restart[b] = true;
        any = any || s->restart[b];
    }
    if (any)
        TMM_TRY(tmm_gen_restart(s->gen, s->restart));
    memset(s->restart, 0, s->B * sizeof *s->restart);
    return tmm_generator_step(s->gen, s->tokens, s->logits);
}

static void *run(void *arg)
{
    serve_sched *s = arg;
    stage *st = calloc(s->B, sizeof *st);
    pthread_mutex_lock(&s->lock);
    if (!st)
        s->stop = true;
    while (!s->stop) {
        reap_and_admit(s);
        if (s->busy == 0) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        /* the slots are this thread's: only it fills and empties them */
        prefill_admitted(s, st);
        pthread_mutex_lock(&s->lock);
        if (s->busy == 0) /* every one ended at its prefill */
            continue;
        for (uint32_t b = 0; b < s->B; b++)
            s->tokens[b] = s->slot[b] ? s->slot[b]->last : 0;
        pthread_mutex_unlock(&s->lock);
        const double t0 = serve_now();
        tmm_status rc = step(s);
        const double t1 = serve_now();
        char error[200] = "";
        if (rc != TMM_OK)
            snprintf(error, sizeof error, "the generator failed: %s", tmm_last_error());
        uint32_t made = 0;
        for (uint32_t b = 0; b < s->B && rc == TMM_OK; b++) {
            memset(&st[b], 0, sizeof st[b]);
            if (s->slot[b] && advance(s, b, s->logits + (size_t)b * s->V, t1, &st[b]) != TMM_OK)
                snprintf(st[b].error, sizeof st[b].error, "%s", tmm_last_error());
            made += st[b].token;
        }
        pthread_mutex_lock(&s->lock);
        if (rc != TMM_OK)
            fail_active(s, error);
        else
            for (uint32_t b = 0; b < s->B; b++)
                if (s->slot[b])
                    publish(s, b, &st[b]);
        serve_metrics_step(s->metrics, t1 - t0, made, t1);
    }
    /* shutting down: nothing queued or running survives */
    fail_active(s, "the server is shutting down");
    while (s->head) {
        serve_seq *q = s->head;
        s->head = q->next;
        q->queued = false;
        end_seq(s, q, NULL, "the server is shutting down");
    }
    s->tail = NULL;
    s->queued = 0;
    serve_metrics_gauges(s->metrics, 0, 0);
    pthread_mutex_unlock(&s->lock);
    free(st);
    return NULL;
}

/* ---- the other threads' side ------------------------------------------------------------ */

tmm_status serve_sched_create(tmm_generator *gen, serve_metrics *metrics, uint32_t queue_limit, serve_sched **out)
{
    *out = NULL;
    const tmm_generator_info *info = tmm_generator_get_info(gen);
    serve_sched *s = calloc(1, sizeof *s);
    if (!s)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    s->gen = gen, s->metrics = metrics, s->queue_limit = queue_limit;
    s->B = info->batch, s->V = info->config.vocab, s->n_ctx = info->config.n_ctx, s->eot = info->eot;
    s->slot = calloc(s->B, sizeof *s->slot);
    s->restart = calloc(s->B, sizeof *s->restart);
    s->admitted = calloc(s->B, sizeof *s->admitted);
    s->tokens = calloc(s->B, sizeof *s->tokens);
    s->logits = malloc((size_t)s->B * s->V * sizeof *s->logits);
    tmm_status rc = s->slot && s->restart && s->admitted && s->tokens && s->logits
                        ? TMM_OK
                        : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (rc == TMM_OK) {
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->wake, NULL);
        if (pthread_create(&s->thread, NULL, run, s) != 0)
            rc = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "cannot start the scheduler thread");
        else
            s->started = true;
        if (!s->started) {
            pthread_cond_destroy(&s->wake);
            pthread_mutex_destroy(&s->lock);
        }
    }
    if (rc != TMM_OK) {
        free(s->slot), free(s->restart), free(s->admitted), free(s->tokens), free(s->logits);
        free(s);
        return rc;
    }
    *out = s;
    return TMM_OK;
}

void serve_sched_stop(serve_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->wake);
    const bool join = s->started;
    s->started = false;
    pthread_mutex_unlock(&s->lock);
    if (join)
        pthread_join(s->thread, NULL);
}

void serve_sched_destroy(serve_sched *s)
{
    if (!s)
        return;
    serve_sched_stop(s);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->slot), free(s->restart), free(s->admitted), free(s->tokens), free(s->logits), free(s->rows);
    free(s->scratch.data);
    free(s);
}

serve_submit_result serve_sched_submit(serve_sched *s, serve_job *job)
{
    uint32_t need = 0;
    tmm_bytes scratch = { 0 };
    tmm_status rc = TMM_OK;
    job->t_submit = serve_now();
    for (uint32_t i = 0; i < job->n_seqs; i++) {
        serve_seq *q = &job->seqs[i];
        const bool scores = job->echo && job->logprobs && q->prompt_len > 1;
        q->done = !(q->max_tokens > 0 || scores);
        q->finish = q->done ? "length" : NULL;
        need += !q->done;
        /* the echoed prompt is released at once, with its first token's entry */
        for (uint32_t t = 0; job->echo && t < q->prompt_len && rc == TMM_OK; t++) {
            const char *bytes;
            size_t len;
            rc = serve_token_text(s->gen, &scratch, q->prompt[t], &bytes, &len);
            if (rc == TMM_OK)
                rc = tmm_bytes_append(&q->out, bytes, len);
            if (rc == TMM_OK && t == 0 && job->logprobs) {
                serve_entry e = { .token = q->prompt[0], .logprob = NAN };
                rc = push_entry(q, &e);
                q->text_bytes = (uint32_t)len;
            }
        }
    }
    free(scratch.data);
    (void)rc; /* out of memory: the echo is short, nothing worse */
    pthread_mutex_lock(&s->lock);
    serve_submit_result r = SERVE_SUBMITTED;
    const uint64_t room = (uint64_t)(s->B - s->busy) + s->queue_limit;
    if (s->draining || s->stop)
        r = SERVE_DRAINING;
    else if ((uint64_t)need > (uint64_t)s->B + s->queue_limit)
        r = SERVE_TOO_BIG;
    else if ((uint64_t)s->queued + need > room)
        r = SERVE_QUEUE_FULL;
    for (uint32_t i = 0; r == SERVE_SUBMITTED && i < job->n_seqs; i++) {
        serve_seq *q = &job->seqs[i];
        if (q->done)
            continue;
        q->queued = true;
        q->next = NULL;
        if (s->tail)
            s->tail->next = q;
        else
            s->head = q;
        s->tail = q;
        s->queued++;
        job->live++;
    }
    if (r == SERVE_SUBMITTED && need) {
        uint64_t prompt = 0;
        for (uint32_t i = 0; i < job->n_seqs; i++)
            prompt += job->seqs[i].done ? 0 : job->seqs[i].prompt_len;
        serve_metrics_prompt(s->metrics, prompt);
        serve_metrics_gauges(s->metrics, s->queued, s->busy);
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}

bool serve_sched_wait(serve_sched *s, serve_job *job, uint64_t *seen, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&s->lock);
    while (job->version == *seen && job->live > 0)
        if (pthread_cond_timedwait(&job->cv, &s->lock, &until) == ETIMEDOUT)
            break;
    *seen = job->version;
    const bool done = job->live == 0;
    pthread_mutex_unlock(&s->lock);
    return done;
}

void serve_sched_cancel(serve_sched *s, serve_job *job)
{
    pthread_mutex_lock(&s->lock);
    job->cancelled = true;
    for (uint32_t i = 0; i < job->n_seqs; i++) {
        serve_seq *q = &job->seqs[i];
        if (!q->queued)
            continue;
        serve_seq **p = &s->head, *prev = NULL;
        while (*p && *p != q)
            prev = *p, p = &(*p)->next;
        if (*p) {
            *p = q->next;
            if (s->tail == q)
                s->tail = prev;
            s->queued--;
        }
        q->queued = false;
        end_seq(s, q, NULL, NULL);
    }
    serve_metrics_gauges(s->metrics, s->queued, s->busy);
    pthread_cond_signal(&s->wake);
    while (job->live > 0)
        pthread_cond_wait(&job->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void serve_sched_lock(serve_sched *s) { pthread_mutex_lock(&s->lock); }
void serve_sched_unlock(serve_sched *s) { pthread_mutex_unlock(&s->lock); }

void serve_sched_drain(serve_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->draining = true;
    pthread_mutex_unlock(&s->lock);
}

void serve_sched_load(serve_sched *s, uint32_t *queued, uint32_t *busy)
{
    pthread_mutex_lock(&s->lock);
    *queued = s->queued, *busy = s->busy;
    pthread_mutex_unlock(&s->lock);
}

uint32_t serve_sched_retry_after(serve_sched *s)
{
    pthread_mutex_lock(&s->lock);
    const double wait = s->seq_seconds * (s->queued + 1.0) / s->B;
    pthread_mutex_unlock(&s->lock);
    return wait < 1 ? 1 : wait > 60 ? 60 : (uint32_t)ceil(wait);
}
