/* Running a task: demonstrations, prompts, log-likelihoods of choices in
 * batches through the model's forward, greedy generation, and the metrics
 * (docs/eval.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "eval/ifeval.h"
#include "eval/metrics.h"
#include "eval/strbuf.h"
#include "gen/generator.h"

static tmm_status oom(void) { return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory"); }

static bool is_ws(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static char *concat3(const char *a, const char *b, const char *c)
{
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *s = malloc(na + nb + nc + 1);
    if (s) {
        memcpy(s, a, na), memcpy(s + na, b, nb), memcpy(s + na + nb, c, nc);
        s[na + nb + nc] = '\0';
    }
    return s;
}

/* ---- log-likelihood ---- */
typedef struct request {
    uint32_t *tokens;  /* the sequence: context then continuation, cut from the left to n_ctx + 1 */
    uint32_t len;
    uint32_t scored;   /* its last `scored` tokens are the continuation's */
    bool truncated;
} request;

static tmm_status tokenize(tmm_generator *g, const char *text, size_t n, uint32_t **t, uint32_t *count)
{
    *t = NULL, *count = 0;
    if (n == 0)
        return TMM_OK;
    return tmm_tokenize(g, text, n, t, count);
}

/* lm-eval's _encode_pair: the context's trailing whitespace moves to the
 * continuation; the continuation's tokens are those of context +
 * continuation past the context's own (an empty context is the EOT token). */
static tmm_status encode_pair(tmm_generator *g, const char *ctx, const char *cont, request *r)
{
    const tmm_generator_info *info = tmm_generator_get_info(g);
    size_t cl = strlen(ctx), k = cl;
    while (k > 0 && is_ws(ctx[k - 1]))
        k--;
    char *whole = concat3(ctx, cont, "");
    if (!whole)
        return oom();
    uint32_t *w = NULL, *c = NULL, nw = 0, nc = 0;
    tmm_status s = TMM_OK;
    if (k == 0) {
        if (info->eot == UINT32_MAX)
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "an empty context needs an end-of-text token, and this "
                         "checkpoint's tokenizer (%s) has none", info->tokenizer);
        if (s == TMM_OK)
            s = tokenize(g, whole, strlen(whole), &c, &nc);
        if (s == TMM_OK && !(w = malloc(((size_t)nc + 1) * sizeof *w)))
            s = oom();
        if (s == TMM_OK) {
            w[0] = info->eot;
            if (nc)
                memcpy(w + 1, c, nc * sizeof *w);
            nw = nc + 1;
            nc = 1;
        }
    } else {
        s = tokenize(g, whole, strlen(whole), &w, &nw);
        if (s == TMM_OK)
            s = tokenize(g, ctx, k, &c, &nc);
    }
    free(whole), free(c);
    if (s != TMM_OK) {
        free(w);
        return s;
    }
    const uint32_t keep = info->config.n_ctx + 1;
    uint32_t cont_len = nw > nc ? nw - nc : 0;
    r->truncated = nw > keep;
    if (nw > keep) {
        memmove(w, w + (nw - keep), keep * sizeof *w);
        nw = keep;
    }
    r->tokens = w, r->len = nw;
    r->scored = cont_len < nw - 1 ? cont_len : nw - 1;
    r->truncated |= r->scored < cont_len;
    return TMM_OK;
}

/* one forward of up to batch requests; out[i] = the sum of the scored tokens' log-probabilities */
static tmm_status loglik_chunk(tmm_generator *g, const request *reqs, uint32_t count, double *out, float *row)
{
    const tmm_generator_info *info = tmm_generator_get_info(g);
    const uint32_t B = info->batch, V = info->config.vocab;
    static const uint32_t dummy = 0;
    const uint32_t **seqs = malloc(B * sizeof *seqs);
    uint32_t *lens = malloc(B * sizeof *lens);
    tmm_status s = seqs && lens ? TMM_OK : oom();
    for (uint32_t b = 0; s == TMM_OK && b < B; b++) {
        seqs[b] = b < count ? reqs[b].tokens : &dummy;
        lens[b] = b < count ? reqs[b].len - 1 : 1;
    }
    tmm_model *m = NULL;
    uint32_t row_len = 0;
    if (s == TMM_OK)
        s = tmm_gen_forward(g, seqs, lens, &m, &row_len);
    for (uint32_t b = 0; s == TMM_OK && b < count; b++) {
        double sum = 0;
        for (uint32_t t = lens[b] - reqs[b].scored; s == TMM_OK && t < lens[b]; t++) {
            s = tmm_model_logits_rows(m, (uint64_t)b * row_len + t, 1, row);
            double mx = -INFINITY, z = 0;
            for (uint32_t v = 0; v < V; v++)
                mx = fmax(mx, row[v]);
            for (uint32_t v = 0; v < V; v++)
                z += exp((double)row[v] - mx);
            sum += (double)row[reqs[b].tokens[t + 1]] - mx - log(z);
        }
        out[b] = sum;
    }
    free(seqs), free(lens);
    return s;
}

static void requests_free(request *r, uint32_t n)
{
    for (uint32_t i = 0; r && i < n; i++)
        free(r[i].tokens);
    free(r);
}

tmm_status tmm_eval_loglik(tmm_generator *g, const char *const *contexts, const char *const *conts, uint32_t count,
                           double *loglik, uint32_t *truncated)
{
    const tmm_generator_info *info = tmm_generator_get_info(g);
    request *r = calloc(count ? count : 1, sizeof *r);
    float *row = malloc((size_t)info->config.vocab * sizeof *row);
    tmm_status s = r && row ? TMM_OK : oom();
    for (uint32_t i = 0; s == TMM_OK && i < count; i++)
        s = encode_pair(g, contexts[i], conts[i], &r[i]);
    for (uint32_t i = 0; s == TMM_OK && i < count; i += info->batch) {
        uint32_t n = count - i < info->batch ? count - i : info->batch;
        s = loglik_chunk(g, r + i, n, loglik + i, row);
    }
    for (uint32_t i = 0; s == TMM_OK && truncated && i < count; i++)
        *truncated += r[i].truncated;
    requests_free(r, count);
    free(row);
    return s;
}

/* ---- generation ---- */
/* Greedy continuations of up to batch prompts, max_gen tokens at most,
 * ending at the EOT token and (stop_newline) before the first newline.
 * Prompts are cut from the left so that the answer fits in n_ctx. */
static tmm_status generate_chunk(tmm_generator *g, char *const *prompts, uint32_t count, uint32_t max_gen,
                                 bool stop_newline, char **out, bool *truncated)
{
    const tmm_generator_info *info = tmm_generator_get_info(g);
    const uint32_t B = info->batch, V = info->config.vocab, n = info->config.n_ctx;
    const uint32_t G = max_gen < n ? max_gen : n, keep = n - G + 1;
    uint32_t **toks = calloc(B, sizeof *toks), *lens = calloc(B, sizeof *lens), *next = calloc(B, sizeof *next);
    const uint32_t **seqs = calloc(B, sizeof *seqs);
    float *logits = malloc((size_t)B * V * sizeof *logits);
    sbuf *t = calloc(B, sizeof *t);
    bool *done = calloc(B, sizeof *done);
    static const uint32_t dummy = 0;
    tmm_status s = toks && lens && next && seqs && logits && t && done ? TMM_OK : oom();
    for (uint32_t b = 0; s == TMM_OK && b < B; b++) {
        if (b < count)
            s = tokenize(g, prompts[b], strlen(prompts[b]), &toks[b], &lens[b]);
        done[b] = b >= count;
        if (s == TMM_OK && lens[b] == 0) { /* an empty prompt starts from EOT (or token 0) */
            free(toks[b]);
            if (!(toks[b] = malloc(sizeof **toks)))
                s = oom();
            else
                toks[b][0] = info->eot == UINT32_MAX ? 0 : info->eot, lens[b] = 1;
        }
        if (s == TMM_OK && b < count) {
            truncated[b] = lens[b] > keep;
            seqs[b] = lens[b] > keep ? toks[b] + (lens[b] - keep) : toks[b];
            lens[b] = lens[b] > keep ? keep : lens[b];
        } else if (s == TMM_OK) {
            seqs[b] = &dummy;
        }
    }
    if (s == TMM_OK)
        s = tmm_generator_prefill(g, seqs, lens, logits);
    const tmm_sampler greedy = { 0, 0, 1, true, 0 };
    for (uint32_t step = 0; s == TMM_OK; step++) {
        bool all = true;
        for (uint32_t b = 0; s == TMM_OK && b < B; b++) {
            next[b] = 0;
            if (done[b])
                continue;
            s = tmm_sample(&greedy, logits + (size_t)b * V, V, 0, &next[b]);
            char piece[1024];
            size_t len = s == TMM_OK && next[b] != info->eot ? tmm_detokenize(g, next[b], piece, sizeof piece) : 0;
            len = len < sizeof piece ? len : sizeof piece - 1;
            char *nl = stop_newline ? memchr(piece, '\n', len) : NULL;
            if (s == TMM_OK)
                sb_add(&t[b], piece, nl ? (size_t)(nl - piece) : len);
            if (s == TMM_OK && t[b].failed)
                s = oom();
            done[b] = next[b] == info->eot || nl || step + 1 >= G;
            all &= done[b];
        }
        if (s != TMM_OK || all)
            break;
        s = tmm_generator_step(g, next, logits);
    }
    for (uint32_t b = 0; s == TMM_OK && b < count; b++) {
        out[b] = t[b].s ? t[b].s : concat3("", "", "");
        t[b].s = NULL;
        if (!out[b])
            s = oom();
    }
    for (uint32_t b = 0; b < B; b++) {
        if (toks)
            free(toks[b]);
        if (t)
            free(t[b].s);
    }
    free(toks), free(lens), free(next), free(seqs), free(logits), free(t), free(done);
    return s;
}

/* ---- the task ---- */
static const char *demo_target(const tmm_eval_set *set, const tmm_eval_item *it)
{
    if (tmm_eval_task_kind(set->task) == TMM_EVAL_CHOICE)
        return it->choices[it->gold];
    return it->n_answers ? it->answers[0] : "unanswerable";
}

/* the demonstrations, each "context target", joined and followed by "\n\n"; *first: the item after the last */
static tmm_status build_prefix(const tmm_eval_set *from, uint32_t shots, char **prefix, uint32_t *first)
{
    sbuf t = { 0 };
    uint32_t got = 0, i = 0;
    for (; i < from->count && got < shots; i++) {
        const tmm_eval_item *it = &from->items[i];
        if (it->skip)
            continue;
        sb_str(&t, it->context), sb_str(&t, " "), sb_str(&t, demo_target(from, it)), sb_str(&t, "\n\n");
        if (t.failed) {
            free(t.s);
            return oom();
        }
        got++;
    }
    if (got < shots) {
        free(t.s);
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "--shots %u: the few-shot items hold only %u usable ones", shots,
                        got);
    }
    *first = i;
    *prefix = t.s ? t.s : concat3("", "", "");
    return *prefix ? TMM_OK : oom();
}

static tmm_status add_reason(tmm_eval_report *r, const char *reason)
{
    r->skipped++;
    for (uint32_t i = 0; i < r->n_reasons; i++)
        if (strcmp(r->reasons[i].reason, reason) == 0) {
            r->reasons[i].count++;
            return TMM_OK;
        }
    uint32_t k = r->n_reasons < TMM_EVAL_MAX_REASONS ? r->n_reasons++ : TMM_EVAL_MAX_REASONS - 1;
    if (k == TMM_EVAL_MAX_REASONS - 1 && r->reasons[k].reason) { /* the last one collects the rest */
        r->reasons[k].count++;
        free(r->reasons[k].reason);
        r->reasons[k].reason = concat3("other reasons", "", "");
        return r->reasons[k].reason ? TMM_OK : oom();
    }
    r->reasons[k].count = 1;
    r->reasons[k].reason = concat3(reason, "", "");
    return r->reasons[k].reason ? TMM_OK : oom();
}

static void metric(tmm_eval_report *r, const char *name, const double *x, uint32_t n)
{
    r->metrics[r->n_metrics++] = (tmm_eval_metric){ name, tmm_eval_mean(x, n), tmm_eval_stderr(x, n) };
}

static tmm_status run_choice(tmm_generator *g, const tmm_eval_set *set, const char *prefix, uint32_t *idx,
                             uint32_t n_items, const tmm_eval_options *o, tmm_eval_report *r)
{
    const tmm_generator_info *info = tmm_generator_get_info(g);
    uint32_t total = 0;
    for (uint32_t k = 0; k < n_items; k++)
        total += set->items[idx[k]].n_choices;
    const uint32_t total_alloc = total;
    request *req = calloc(total ? total : 1, sizeof *req);
    uint32_t *owner = calloc(total ? total : 1, sizeof *owner);
    double *ll = calloc(total ? total : 1, sizeof *ll), *acc = calloc(n_items + 1, sizeof *acc),
           *accn = calloc(n_items + 1, sizeof *accn);
    uint32_t *gold = calloc(n_items + 1, sizeof *gold), *pred = calloc(n_items + 1, sizeof *pred);
    float *row = malloc((size_t)info->config.vocab * sizeof *row);
    tmm_status s = req && owner && ll && acc && accn && gold && pred && row ? TMM_OK : oom();
    uint32_t kept = 0, q = 0; /* items whose every choice adds a token to the context */
    for (uint32_t k = 0; s == TMM_OK && k < n_items; k++) {
        const tmm_eval_item *it = &set->items[idx[k]];
        char *ctx = concat3(prefix, it->context, "");
        bool empty = false;
        for (uint32_t c = 0; s == TMM_OK && c < it->n_choices; c++) {
            char *cont = concat3(" ", it->choices[c], "");
            s = ctx && cont ? encode_pair(g, ctx, cont, &req[q + c]) : oom();
            owner[q + c] = kept;
            empty |= s == TMM_OK && req[q + c].scored == 0;
            free(cont);
        }
        free(ctx);
        if (s == TMM_OK && empty) {
            for (uint32_t c = 0; c < it->n_choices; c++)
                free(req[q + c].tokens), req[q + c] = (request){ 0 };
            s = add_reason(r, "a choice adds no token to the context");
            r->scored--;
        } else if (s == TMM_OK) {
            idx[kept++] = idx[k];
            q += it->n_choices;
        }
    }
    total = q;
    n_items = kept;
    if (s == TMM_OK && n_items == 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no item can be scored: %s", r->reasons[r->n_reasons - 1].reason);
    for (uint32_t at = 0; s == TMM_OK && at < total; at += info->batch) {
        uint32_t n = total - at < info->batch ? total - at : info->batch;
        s = loglik_chunk(g, req + at, n, ll + at, row);
        if (s == TMM_OK && o->on_progress)
            o->on_progress(at + n == total ? n_items : owner[at + n], n_items, o->user);
    }
    q = 0;
    for (uint32_t k = 0; s == TMM_OK && k < n_items; k++) {
        const tmm_eval_item *it = &set->items[idx[k]];
        uint32_t best = 0, best_norm = 0;
        bool cut = false;
        double *keep = malloc(it->n_choices * sizeof *keep);
        if (!keep) {
            s = oom();
            break;
        }
        for (uint32_t c = 0; c < it->n_choices; c++) {
            keep[c] = ll[q + c];
            cut |= req[q + c].truncated;
            if (ll[q + c] > ll[q + best])
                best = c;
            /* lm-eval: argmax of loglik / len(choice) in characters */
            if (ll[q + c] / tmm_utf8_length(it->choices[c]) >
                ll[q + best_norm] / tmm_utf8_length(it->choices[best_norm]))
                best_norm = c;
        }
        r->loglik[idx[k]] = keep;
        acc[k] = best == it->gold, accn[k] = best_norm == it->gold;
        gold[k] = it->gold, pred[k] = best;
        r->truncated += cut;
        q += it->n_choices;
    }
    if (s == TMM_OK) {
        metric(r, "acc", acc, n_items);
        metric(r, "acc_norm", accn, n_items);
        const char *name = tmm_eval_task_name(set->task);
        if (strcmp(name, "mrpc") == 0 || strcmp(name, "qqp") == 0)
            r->metrics[r->n_metrics++] = (tmm_eval_metric){
                "f1", tmm_eval_binary_f1(gold, pred, n_items),
                tmm_eval_bootstrap_stderr(tmm_eval_binary_f1, gold, pred, n_items, TMM_EVAL_BOOTSTRAP_ITERS) };
        if (strcmp(name, "cola") == 0)
            r->metrics[r->n_metrics++] = (tmm_eval_metric){
                "mcc", tmm_eval_mcc(gold, pred, n_items),
                tmm_eval_bootstrap_stderr(tmm_eval_mcc, gold, pred, n_items, TMM_EVAL_BOOTSTRAP_ITERS) };
    }
    requests_free(req, total_alloc);
    free(owner), free(ll), free(acc), free(accn), free(gold), free(pred), free(row);
    return s;
}

/* the generated answer as the prediction: stripped; "unanswerable" is the empty answer */
static tmm_status run_generate(tmm_generator *g, const tmm_eval_set *set, const char *prefix, const uint32_t *idx,
                               uint32_t n_items, const tmm_eval_options *o, tmm_eval_report *r)
{
    const tmm_generator_info *info = tmm_generator_get_info(g);
    const bool qa = tmm_eval_task_kind(set->task) == TMM_EVAL_QA;
    const uint32_t B = info->batch, half = info->config.n_ctx / 2 ? info->config.n_ctx / 2 : 1;
    const uint32_t deflt = qa ? 32 : 256; /* the default leaves at least half the window to the prompt */
    const uint32_t max_gen = o->max_gen ? o->max_gen : deflt < half ? deflt : half;
    char **prompts = calloc(B, sizeof *prompts);
    bool *cut = calloc(B, sizeof *cut);
    uint32_t n_rules = 0;
    for (uint32_t k = 0; k < n_items; k++)
        n_rules += set->items[idx[k]].n_rules;
    double *a = calloc(n_items + 1, sizeof *a), *b2 = calloc(n_items + 1, sizeof *b2),
           *c = calloc(n_rules + 1, sizeof *c), *d = calloc(n_rules + 1, sizeof *d);
    tmm_status s = prompts && cut && a && b2 && c && d ? TMM_OK : oom();
    uint32_t rule = 0;
    for (uint32_t k0 = 0; s == TMM_OK && k0 < n_items; k0 += B) {
        uint32_t n = n_items - k0 < B ? n_items - k0 : B;
        for (uint32_t b = 0; s == TMM_OK && b < n; b++)
            if (!(prompts[b] = concat3(prefix, set->items[idx[k0 + b]].context, "")))
                s = oom();
        char **out = r->generated;
        char *got[64];
        char **gen = B <= 64 ? got : calloc(B, sizeof *gen);
        if (s == TMM_OK && !gen)
            s = oom();
        if (s == TMM_OK)
            s = generate_chunk(g, prompts, n, max_gen, qa, gen, cut);
        for (uint32_t b = 0; s == TMM_OK && b < n; b++) {
            const uint32_t k = k0 + b;
            const tmm_eval_item *it = &set->items[idx[k]];
            out[idx[k]] = gen[b];
            r->truncated += cut[b];
            if (qa) {
                size_t len = strlen(gen[b]), i = 0;
                while (len && is_ws(gen[b][len - 1]))
                    len--;
                while (i < len && is_ws(gen[b][i]))
                    i++;
                memmove(gen[b], gen[b] + i, len - i);
                gen[b][len - i] = '\0';
                char *norm = tmm_squad_normalize(gen[b]);
                const char *pred = norm && strcmp(norm, "unanswerable") == 0 ? "" : gen[b];
                tmm_squad_score((const char *const *)it->answers, it->n_answers, pred, &a[k], &b2[k]);
                free(norm);
            } else {
                bool all_s = true, all_l = true;
                for (uint32_t j = 0; j < it->n_rules; j++, rule++) {
                    c[rule] = tmm_ifeval_follows(&it->rules[j], gen[b]);
                    d[rule] = tmm_ifeval_follows_loose(&it->rules[j], gen[b]);
                    all_s &= c[rule] != 0, all_l &= d[rule] != 0;
                }
                a[k] = all_s, b2[k] = all_l;
            }
        }
        for (uint32_t b = 0; b < n; b++)
            free(prompts[b]), prompts[b] = NULL;
        if (gen != got)
            free(gen);
        if (s == TMM_OK && o->on_progress)
            o->on_progress(k0 + n, n_items, o->user);
    }
    if (s == TMM_OK && qa) {
        metric(r, "exact_match", a, n_items);
        metric(r, "f1", b2, n_items);
    } else if (s == TMM_OK) {
        metric(r, "prompt_level_strict_acc", a, n_items);
        metric(r, "inst_level_strict_acc", c, rule);
        metric(r, "prompt_level_loose_acc", b2, n_items);
        metric(r, "inst_level_loose_acc", d, rule);
    }
    free(prompts), free(cut), free(a), free(b2), free(c), free(d);
    return s;
}

tmm_status tmm_eval_run(tmm_generator *g, const tmm_eval_set *set, const tmm_eval_set *fewshot,
                        const tmm_eval_options *o, tmm_eval_report *r)
{
    const tmm_eval_kind kind = tmm_eval_task_kind(set->task);
    memset(r, 0, sizeof *r);
    r->task = tmm_eval_task_name(set->task);
    r->kind = kind;
    r->items = set->count;
    r->shots = o->shots;
    r->count = set->count;
    if (kind == TMM_EVAL_IFEVAL && o->shots)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "ifeval is zero-shot (its items are instructions, not examples); "
                        "drop --shots");
    if (strcmp(tmm_generator_get_info(g)->tokenizer, "copy-symbols") == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the checkpoint reads copy-task symbols, not text; --task needs a "
                        "model trained on text (tokenizer bytes or a tokenizer.json)");
    char *prefix = NULL;
    uint32_t first = 0, *idx = calloc(set->count, sizeof *idx), n_items = 0;
    r->loglik = calloc(set->count, sizeof *r->loglik);
    r->generated = calloc(set->count, sizeof *r->generated);
    tmm_status s = idx && r->loglik && r->generated ? TMM_OK : oom();
    if (s == TMM_OK && o->shots)
        s = build_prefix(fewshot ? fewshot : set, o->shots, &prefix, &first);
    else if (s == TMM_OK && !(prefix = concat3("", "", "")))
        s = oom();
    if (fewshot)
        first = 0;
    uint32_t end = o->limit && o->limit < set->count - first ? first + o->limit : set->count;
    for (uint32_t i = first; s == TMM_OK && i < end; i++) {
        if (set->items[i].skip)
            s = add_reason(r, set->items[i].skip);
        else
            idx[n_items++] = i;
    }
    r->scored = n_items;
    if (s == TMM_OK && n_items == 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no item of the %u can be scored (%s)", set->count,
                     r->n_reasons ? r->reasons[0].reason : "the demonstrations take them all");
    if (s == TMM_OK)
        s = kind == TMM_EVAL_CHOICE ? run_choice(g, set, prefix, idx, n_items, o, r)
                                    : run_generate(g, set, prefix, idx, n_items, o, r);
    free(prefix), free(idx);
    if (s != TMM_OK)
        tmm_eval_report_free(r);
    return s;
}

void tmm_eval_report_free(tmm_eval_report *r)
{
    for (uint32_t i = 0; i < r->n_reasons; i++)
        free(r->reasons[i].reason);
    for (uint32_t i = 0; i < r->count; i++) {
        if (r->loglik)
            free(r->loglik[i]);
        if (r->generated)
            free(r->generated[i]);
    }
    free(r->loglik), free(r->generated);
    memset(r, 0, sizeof *r);
}
