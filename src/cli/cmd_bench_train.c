/* tmm bench train: speed of one training step and where its device time goes. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer.h"
#include "cli.h"
#include "model/model.h"
#include "train/optim.h"
#include "train/train_config.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define MAX_OPS 32

typedef struct op_time {
    const char *name;
    double ms;
} op_time;

int bench_train(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "preset", required_argument, NULL, 'p' }, { "d-model", required_argument, NULL, 'd' },
        { "n-ctx", required_argument, NULL, 'n' },  { "layers", required_argument, NULL, 'l' },
        { "heads", required_argument, NULL, 'H' },  { "batch", required_argument, NULL, 'b' },
        { "vocab", required_argument, NULL, 'V' },  { "steps", required_argument, NULL, 's' },
        { "device", required_argument, NULL, 'D' }, { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },         { 0, 0, 0, 0 },
    };
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.model.vocab = 16;
    unsigned long v, steps = 20;
    int opt, device = -1;
    bool json = false;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'p': {
            const char *text = tmm_train_preset(optarg);
            if (!text) {
                cli_fail("no preset '%s' (see tmm train --help)\n", optarg);
                return 2;
            }
            tmm_status s = tmm_train_config_apply_json(&c, text, optarg);
            if (s != TMM_OK)
                return cli_error("bad preset", s);
            if (c.task == TMM_DATA_TEXT)
                c.model.vocab = 257;
            break;
        }
        case 'd': ok = cli_parse_uint("--d-model", optarg, TMM_MAX_D_MODEL, &v), c.model.d_model = (uint32_t)v; break;
        case 'n': ok = cli_parse_uint("--n-ctx", optarg, TMM_MAX_N_CTX, &v), c.model.n_ctx = (uint32_t)v; break;
        case 'l': ok = cli_parse_uint("--layers", optarg, TMM_MAX_LAYERS, &v), c.model.n_layers = (uint32_t)v; break;
        case 'H': ok = cli_parse_uint("--heads", optarg, TMM_MAX_HEADS, &v), c.model.heads = (uint32_t)v; break;
        case 'b': ok = cli_parse_uint("--batch", optarg, 1 << 20, &v), c.batch = (uint32_t)v; break;
        case 'V': ok = cli_parse_uint("--vocab", optarg, TMM_MAX_VOCAB, &v), c.model.vocab = (uint32_t)v; break;
        case 's': ok = cli_parse_uint("--steps", optarg, 1 << 20, &steps); break;
        case 'D': ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v), device = (int)v; break;
        case 'j': json = true; break;
        case 'h':
            printf("usage: tmm bench train [--preset NAME] [--d-model N --n-ctx N --layers N --heads N]\n"
                   "                       [--batch N] [--vocab N] [--steps N] [--device N] [--json]\n\n"
                   "Times training steps (forward, backward, clipping and AdamW, recorded once and\n"
                   "replayed) on random tokens: tokens/s, ms per step, CPU time per step, and the\n"
                   "share of device time per op from timestamp queries. Defaults: the tiny-copy model,\n"
                   "batch 16, vocab 16, 20 measured steps after 2 warm-up steps.\n");
            return 0;
        default: return 2;
        }
        if (!ok)
            return 2;
    }
    if (steps == 0) {
        cli_fail("--steps must be at least 1\n");
        return 2;
    }
    tmm_status s = tmm_model_config_check(&c.model);
    if (s != TMM_OK)
        return cli_error("bad model", s);
    tmm_device *dev;
    if (cli_open_device(device, &dev))
        return 1;
    tmm_model *m = NULL;
    tmm_optim *o = NULL;
    tmm_recorder *r = NULL;
    const uint32_t B = c.batch, n = c.model.n_ctx, rows = B * n;
    uint32_t *tok = malloc((size_t)rows * 4);
    int32_t *tgt = malloc((size_t)rows * 4);
    if (!tok || !tgt) {
        cli_fail("out of memory\n");
        return 1;
    }
    for (uint32_t i = 0; i < rows; i++) {
        tok[i] = (i * 2654435761u >> 7) % c.model.vocab;
        tgt[i] = (int32_t)((i * 40503u + 7) % c.model.vocab);
    }
    if ((s = tmm_model_create(dev, &c.model, B, &m)) == TMM_OK &&
        (s = tmm_optim_create(dev, tmm_model_table(m), &c.optim, &o)) == TMM_OK &&
        (s = tmm_model_set_batch(m, tok, tgt)) == TMM_OK && (s = tmm_recorder_create(dev, &r)) == TMM_OK) {
        tmm_model_set_profile(m, true);
        if ((s = tmm_recorder_begin(r)) == TMM_OK && (s = tmm_model_record(m, r, true)) == TMM_OK &&
            (s = tmm_record_region_begin(r, "adamw")) == TMM_OK &&
            (s = tmm_optim_record(o, r, tmm_whole(tmm_model_param_buffer(m)), tmm_whole(tmm_model_grad_buffer(m)))) ==
                TMM_OK &&
            (s = tmm_record_region_end(r)) == TMM_OK)
            s = tmm_recorder_end(r);
    }
    op_time ops[MAX_OPS];
    int n_ops = 0;
    double wall = 0, cpu = 0, device_ms = 0;
    bool timed = true;
    for (unsigned long step = 0; s == TMM_OK && step < steps + 2; step++) {
        double w0 = cli_now_ms() * 1e-3, c0 = cpu_s();
        if ((s = tmm_optim_set_step(o, (uint32_t)step + 1, 1e-4)) != TMM_OK ||
            (s = tmm_model_set_batch(m, tok, tgt)) != TMM_OK || (s = tmm_recorder_run(r)) != TMM_OK)
            break;
        if (step < 2)
            continue; /* warm-up: lavapipe compiles shaders on first use */
        wall += cli_now_ms() * 1e-3 - w0;
        cpu += cpu_s() - c0;
        for (uint32_t i = 0; timed && i < tmm_recorder_regions(r); i++) {
            const char *label;
            double ms;
            if (tmm_recorder_region_time(r, i, &label, &ms) != TMM_OK) {
                timed = false;
                break;
            }
            int j = 0;
            while (j < n_ops && strcmp(ops[j].name, label) != 0)
                j++;
            if (j == n_ops && n_ops < MAX_OPS)
                ops[n_ops++] = (op_time){ label, 0 };
            if (j < n_ops)
                ops[j].ms += ms;
            device_ms += ms;
        }
    }
    int rc = 0;
    if (s != TMM_OK) {
        rc = cli_error("benchmark failed", s);
    } else {
        double ms_step = wall / (double)steps * 1e3, cpu_step = cpu / (double)steps * 1e3;
        double tps = (double)rows * (double)steps / wall;
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
            cJSON *mc = cJSON_AddObjectToObject(root, "model");
            cJSON_AddNumberToObject(mc, "vocab", c.model.vocab);
            cJSON_AddNumberToObject(mc, "d_model", c.model.d_model);
            cJSON_AddNumberToObject(mc, "n_ctx", c.model.n_ctx);
            cJSON_AddNumberToObject(mc, "n_layers", c.model.n_layers);
            cJSON_AddNumberToObject(mc, "heads", c.model.heads);
            cJSON_AddNumberToObject(root, "batch", B);
            cJSON_AddNumberToObject(root, "steps", (double)steps);
            cJSON_AddNumberToObject(root, "tokens_per_s", tps);
            cJSON_AddNumberToObject(root, "ms_per_step", ms_step);
            cJSON_AddNumberToObject(root, "cpu_ms_per_step", cpu_step);
            cJSON *arr = cJSON_AddArrayToObject(root, "ops");
            for (int j = 0; timed && j < n_ops; j++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "op", ops[j].name);
                cJSON_AddNumberToObject(e, "ms_per_step", ops[j].ms / (double)steps);
                cJSON_AddNumberToObject(e, "share", device_ms > 0 ? ops[j].ms / device_ms : 0);
                cJSON_AddItemToArray(arr, e);
            }
            char *text = cJSON_Print(root);
            printf("%s\n", text);
            free(text);
            cJSON_Delete(root);
        } else {
            printf("device: %s\nmodel: d %u, n %u, L %u, heads %u, vocab %u; batch %u (%u tokens per step)\n",
                   tmm_device_get_info(dev)->name, c.model.d_model, n, c.model.n_layers, c.model.heads,
                   c.model.vocab, B, rows);
            printf("%.1f tokens/s   %.2f ms per step   %.2f ms CPU per step\n", tps, ms_step, cpu_step);
            if (timed) {
                printf("\n%-16s %12s %8s\n", "op", "ms/step", "share");
                for (int j = 0; j < n_ops; j++)
                    printf("%-16s %12.3f %7.1f%%\n", ops[j].name, ops[j].ms / (double)steps,
                           100 * ops[j].ms / device_ms);
            } else {
                printf("(no per-op times: the device has no timestamps on its compute queue)\n");
            }
        }
    }
    tmm_recorder_destroy(r);
    tmm_optim_destroy(o);
    tmm_model_destroy(m);
    tmm_device_destroy(dev);
    free(tok), free(tgt);
    tmm_train_config_free(&c);
    return rc;
}
