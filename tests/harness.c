#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#if defined(__SANITIZE_ADDRESS__)
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dlfcn.h>
#include <link.h>
#endif

#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/checkpoint.h"

tmm_device *h_dev;

#if defined(__SANITIZE_ADDRESS__)
/* LeakSanitizer also reports what the Vulkan driver (llvmpipe's LLVM) and the
 * validation layer leave at exit. They are dlclose'd by then, so their frames
 * read "<unknown module>" and tools/lsan.supp cannot name them. Before any test
 * runs, load them once and pin every loaded library so their names survive;
 * leaks from our own code are still reported. */
static int pin_library(struct dl_phdr_info *info, size_t size, void *data)
{
    if (info->dlpi_name && info->dlpi_name[0])
        dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

__attribute__((constructor)) static void pin_vulkan_libraries(void)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.validate = 1;
    opt.no_pipeline_cache = true;
    tmm_device *d;
    if (tmm_device_create(&opt, &d) == TMM_OK) {
        dl_iterate_phdr(pin_library, NULL);
        tmm_device_destroy(d);
    }
}
#endif

void h_init(void)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    /* TMM_TEST_VALIDATE=0: without the layer, for extensions newer than it
     * (tools/gpu_check.sh's KHR cooperative-matrix pass) */
    const char *v = getenv("TMM_TEST_VALIDATE");
    opt.validate = v && strcmp(v, "0") == 0 ? 0 : 1;
    tmm_status s = tmm_device_create(&opt, &h_dev);
    cr_assert_eq(s, TMM_OK, "creating the test device: %s", tmm_last_error());
}

void h_fini(void)
{
    if (!h_dev)
        return;
    tmm_memory_stats st;
    tmm_device_memory_stats(h_dev, &st);
    uint32_t leaked = st.buffers - (h_dev->staging ? 1u : 0u);
    tmm_device_destroy(h_dev);
    h_dev = NULL;
    /* Read after destroy: messages raised during teardown count too. */
    uint32_t messages = tmm_validation_messages_total();
    cr_assert_eq(leaked, 0, "%u buffers were not destroyed", leaked);
    cr_assert_eq(messages, 0, "%u validation messages (printed above)", messages);
}

bool h_full(void)
{
    const char *v = getenv("TMM_TEST_FULL");
    return v && *v && strcmp(v, "0") != 0;
}

tmm_model_config h_tiny_row(tmm_arch a)
{
    tmm_model_config c = tmm_model_config_default();
    c.arch = a;
    c.vocab = 29, c.d_model = 12, c.n_ctx = 13, c.n_layers = 2, c.expansion = 2, c.seed = 3;
    tmm_model_config_resolve(&c);
    H_OK(tmm_model_config_check(&c));
    return c;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void h_rand(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&st) >> 11) * 0x1.0p-53;
        x[i] = (float)(lo + (hi - lo) * u);
    }
}

float *h_floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p, "out of host memory");
    return p;
}

tmm_buffer *h_buffer(const float *data, size_t n)
{
    tmm_buffer *b;
    H_OK(tmm_buffer_create(h_dev, (n ? n : 1) * sizeof(float), TMM_MEMORY_DEVICE, &b));
    if (data)
        H_OK(tmm_buffer_write(b, 0, data, n * sizeof(float)));
    return b;
}

void h_read(const tmm_buffer *b, float *out, size_t n) { H_OK(tmm_buffer_read(b, 0, out, n * sizeof(float))); }

tmm_recorder *h_begin(void)
{
    tmm_recorder *r;
    H_OK(tmm_recorder_create(h_dev, &r));
    H_OK(tmm_recorder_begin(r));
    return r;
}

void h_run(tmm_recorder *r)
{
    H_OK(tmm_recorder_end(r));
    H_OK(tmm_recorder_run(r));
    tmm_recorder_destroy(r);
}

double h_compare(const char *what, const float *got, const float *ref, size_t n, double atol, double rtol)
{
    double worst = 0, worst_excess = -1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (isnan(got[i]) != isnan(ref[i]))
            d = INFINITY;
        double excess = d - (atol + rtol * fabs((double)ref[i]));
        if (d > worst)
            worst = d;
        if (excess > worst_excess) {
            worst_excess = excess;
            at = i;
        }
    }
    printf("  %-40s n=%-8zu max|dev| = %.3g\n", what, n, worst);
    cr_assert(n == 0 || worst_excess <= 0, "%s: element %zu is %.9g, reference %.9g (atol %.3g, rtol %.3g)", what,
              at, (double)got[at], (double)ref[at], atol, rtol);
    return worst;
}

void h_checkpoint_make(h_checkpoint *f, const tmm_model_config *c, const char *tokenizer, uint64_t step)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/tmm-test-XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
    H_OK(tmm_param_table_build(c, &f->table));
    f->params = h_floats(f->table.arena_floats);
    tmm_param_init(&f->table, f->params);
    for (uint32_t i = 0; i < f->table.count; i++) {
        const tmm_param *p = &f->table.params[i];
        if (p->kind == TMM_PARAM_TOEPLITZ_BETA || p->kind == TMM_PARAM_LINEAR_BIAS)
            h_rand(f->params + p->offset, p->numel, 100 + i, -0.5f, 0.5f);
        if (p->init == TMM_INIT_SMALL)
            h_rand(f->params + p->offset, p->numel, 100 + i, -0.6f, 0.6f);
    }
    tmm_st_meta extra[] = { { "tokenizer", tokenizer } };
    H_OK(tmm_checkpoint_write_model(f->path, step, &f->table, f->params, extra, 1));
}

void h_checkpoint_drop(h_checkpoint *f)
{
    unlink(f->path);
    rmdir(f->dir);
    tmm_param_table_free(&f->table);
    free(f->params);
}
