/* FFT implementation of the causal Toeplitz op: host side (see
 * toeplitz_fft.h for the layout, shaders/toeplitz_fft_*.comp for the
 * kernels, runtime/fft.h for the VkFFT plans). */
#include "toeplitz_fft.h"

#include <stdlib.h>

#include "fft.h"
#include "op_util.h"

#define LOOP_BUDGET TMM_MAX_LOOP

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_rows[3] = { 64, 1, 1 }; /* pack and unpack: a row per invocation */
#define TB 16u /* positions per pack/unpack invocation (TB in the shaders) */

/* Terms one pass of the dw and dbeta sums adds: LOOP_BUDGET, unless the
 * device's tuning lowers it (tests: the multi-pass path on small shapes). */
static uint32_t loop_budget_of(const tmm_device *dev)
{
    uint32_t t = dev->tuning.loop_budget;
    return t == 0 || t > LOOP_BUDGET ? LOOP_BUDGET : t;
}

struct tmm_toeplitz_fft {
    tmm_device *device;
    uint32_t B, n, d, G, K, dg, h; /* h = K - 1: the halo of a chunk */
    uint32_t N, M;
    uint64_t bd, gk;               /* B*d channel rows, G*K w rows */
    uint32_t cr, hr;               /* channel rows per chunk, and with their halos (cr + 2h) */
    tmm_buffer *R, *C, *C2, *CW;   /* real rows, their spectra, products, dw's spectra */
    tmm_fft_plan *r2c_one;         /* hr + GK rows: R -> C */
    tmm_fft_plan *r2c_two;         /* 2hr + GK rows: R -> C */
    tmm_fft_plan *c2r;             /* cr rows: C2 -> R */
    tmm_fft_plan *dw_c2r;          /* GK rows: CW -> R */
};

static tmm_view real_view(const tmm_toeplitz_fft *p, uint64_t rows)
{
    return tmm_sub(p->R, 0, tmm_fft_real_bytes(p->N, (uint32_t)rows));
}

static tmm_view complex_view(tmm_buffer *b, const tmm_toeplitz_fft *p, uint64_t rows)
{
    return tmm_sub(b, 0, tmm_fft_complex_bytes(p->N, (uint32_t)rows));
}

void tmm_toeplitz_fft_destroy(tmm_toeplitz_fft *p)
{
    if (!p)
        return;
    tmm_fft_plan_destroy(p->r2c_one);
    tmm_fft_plan_destroy(p->r2c_two);
    tmm_fft_plan_destroy(p->c2r);
    tmm_fft_plan_destroy(p->dw_c2r);
    tmm_buffer_destroy(p->R);
    tmm_buffer_destroy(p->C);
    tmm_buffer_destroy(p->C2);
    tmm_buffer_destroy(p->CW);
    free(p);
}

uint32_t tmm_toeplitz_fft_length(const tmm_toeplitz_fft *p) { return p ? p->N : 0; }
uint32_t tmm_toeplitz_fft_chunk_rows(const tmm_toeplitz_fft *p) { return p ? p->cr : 0; }

/* The shape fields of a plan, from a checked descriptor. */
static void set_shape(tmm_toeplitz_fft *p, const tmm_toeplitz_desc *desc)
{
    p->B = desc->batch;
    p->n = desc->n;
    p->d = desc->d;
    p->G = desc->groups ? desc->groups : 1;
    p->K = desc->taps ? desc->taps : 1;
    p->dg = p->d / p->G;
    p->h = p->K - 1;
    p->bd = (uint64_t)p->B * p->d;
    p->gk = (uint64_t)p->G * p->K;
}

/* Batches [first, last] that rows [r0 - h, r0 + rows + h) of a chunk touch. */
static void chunk_batches(const tmm_toeplitz_fft *p, uint64_t r0, uint64_t rows, uint64_t *first, uint64_t *last)
{
    uint64_t lo = r0 > p->h ? r0 - p->h : 0, hi = r0 + rows + p->h < p->bd ? r0 + rows + p->h : p->bd;
    *first = lo / p->d;
    *last = (hi - 1) / p->d;
}

/* Bytes one binding of a chunk's activations may need: its batches, plus
 * the lead of an aligned binding. */
static uint64_t chunk_span_bytes(const tmm_toeplitz_fft *p, uint64_t lead)
{
    uint64_t worst = 0;
    for (uint64_t r0 = 0; r0 < p->bd; r0 += p->cr) {
        uint64_t first, last;
        chunk_batches(p, r0, p->cr < p->bd - r0 ? p->cr : p->bd - r0, &first, &last);
        uint64_t bytes = (last - first + 1) * p->n * p->d * sizeof(float);
        worst = bytes > worst ? bytes : worst;
    }
    return worst + lead;
}

/* N, M and the chunk size of a non-empty shape on a device with bindings of
 * `range` bytes: as many channel rows per chunk as R and C (2hr + GK rows
 * of spectra) and the chunk's activations fit in. false: not even one row
 * does. */
static bool set_layout(tmm_toeplitz_fft *p, uint64_t range, uint64_t lead)
{
    if (p->n > UINT32_MAX / 2)
        return false;
    p->N = tmm_fft_good_length(2 * p->n - 1);
    p->M = tmm_fft_complex_count(p->N);
    if (p->N == 0)
        return false;
    const uint64_t fit = range / ((uint64_t)p->M * 8); /* rows of spectra in one binding */
    if (fit < p->gk + 2 * (1 + 2ull * p->h))
        return false;
    uint64_t cr = (fit - p->gk) / 2 - 2ull * p->h;
    if (cr > p->bd)
        cr = p->bd;
    if (p->device->tuning.max_chunk_rows && cr > p->device->tuning.max_chunk_rows)
        cr = p->device->tuning.max_chunk_rows; /* tests: many chunks on small shapes */
    for (;; cr = (cr + 1) / 2) {
        /* equal chunks: the last one transforms as many rows as the others */
        p->cr = (uint32_t)tmm_div_up(p->bd, tmm_div_up(p->bd, cr));
        if (chunk_span_bytes(p, lead) <= range)
            break;
        if (cr == 1)
            return false;
    }
    p->hr = p->cr + 2 * p->h;
    return true;
}

/* Bytes of spectra of `rows` rows (R is as large as C: VkFFT binds that much of it). */
static uint64_t spectra_bytes(const tmm_toeplitz_fft *p, uint64_t rows) { return (uint64_t)p->M * rows * 8; }

static uint64_t total_bytes(const tmm_toeplitz_fft *p)
{
    return 2 * spectra_bytes(p, 2ull * p->hr + p->gk) + spectra_bytes(p, p->cr) + spectra_bytes(p, p->gk);
}

uint64_t tmm_toeplitz_fft_planned_bytes(const tmm_device *device, const tmm_toeplitz_desc *desc)
{
    if (!device || !desc)
        return 0;
    tmm_toeplitz_desc shape = *desc;
    shape.impl = TMM_TOEPLITZ_DIRECT; /* shape checks only */
    tmm_toeplitz_fft p = { .device = (tmm_device *)device };
    if (tmm_toeplitz_check(NULL, &shape) != TMM_OK)
        return 0;
    set_shape(&p, desc);
    if (p.bd * p.n == 0 ||
        !set_layout(&p, device->info.max_storage_buffer_range, device->info.min_storage_buffer_offset_alignment))
        return 0;
    return total_bytes(&p);
}

tmm_status tmm_toeplitz_fft_create(tmm_device *device, const tmm_toeplitz_desc *desc, tmm_toeplitz_fft **out)
{
    static const char op[] = "toeplitz_fft_create";
    if (!out)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL output", op);
    *out = NULL;
    if (!device || !desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL device or descriptor", op);
    tmm_toeplitz_desc shape = *desc;
    shape.impl = TMM_TOEPLITZ_DIRECT; /* shape checks only */
    TMM_TRY(tmm_toeplitz_check(NULL, &shape));
    tmm_toeplitz_fft *p = calloc(1, sizeof *p);
    if (!p)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory", op);
    p->device = device;
    set_shape(p, desc);
    if (p->bd * p->n == 0) {
        *out = p; /* nothing to transform: forward is a no-op, backward writes zero gradients */
        return TMM_OK;
    }
    const uint64_t range = device->info.max_storage_buffer_range;
    if (!set_layout(p, range, device->info.min_storage_buffer_offset_alignment)) {
        tmm_toeplitz_fft_destroy(p);
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: n = %u is too long for the FFT path on this device (one chunk "
                        "of spectra or one sequence of n*d floats exceeds maxStorageBufferRange, %llu bytes); "
                        "use the direct implementation", op, desc->n, (unsigned long long)range);
    }
    const uint64_t one = p->hr + p->gk, two = 2ull * p->hr + p->gk;
    tmm_status s = tmm_buffer_create(device, spectra_bytes(p, two), TMM_MEMORY_DEVICE, &p->R);
    if (s == TMM_OK)
        s = tmm_buffer_create(device, spectra_bytes(p, two), TMM_MEMORY_DEVICE, &p->C);
    if (s == TMM_OK)
        s = tmm_buffer_create(device, spectra_bytes(p, p->cr), TMM_MEMORY_DEVICE, &p->C2);
    if (s == TMM_OK)
        s = tmm_buffer_create(device, spectra_bytes(p, p->gk), TMM_MEMORY_DEVICE, &p->CW);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)one, real_view(p, one), complex_view(p->C, p, one),
                                &p->r2c_one);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)two, real_view(p, two), complex_view(p->C, p, two),
                                &p->r2c_two);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, p->cr, real_view(p, p->cr), complex_view(p->C2, p, p->cr), &p->c2r);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)p->gk, real_view(p, p->gk), complex_view(p->CW, p, p->gk),
                                &p->dw_c2r);
    if (s != TMM_OK) {
        tmm_toeplitz_fft_destroy(p);
        return s;
    }
    *out = p;
    return TMM_OK;
}

/* ---- view checks and bindings -------------------------------------------- */

/* count floats of v from float `first` on, bound from the largest aligned
 * offset at or before them; *base is their element offset in the binding.
 * Fails beyond maxStorageBufferRange. */
static tmm_status bind(const tmm_recorder *r, const char *op, const char *name, tmm_view v, uint64_t first,
                       uint64_t count, tmm_view *out, uint32_t *base)
{
    const tmm_device *dev = tmm_recorder_device(r);
    tmm_view b = tmm_op_bind(dev, v, first, count, base);
    if (b.size > dev->info.max_storage_buffer_range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s (%llu bytes) exceeds the device's maxStorageBufferRange "
                        "(%llu bytes); use the direct implementation", op, name, (unsigned long long)b.size,
                        (unsigned long long)dev->info.max_storage_buffer_range);
    *out = b;
    return TMM_OK;
}

static tmm_status check_plan(tmm_recorder *r, tmm_toeplitz_fft *p, const char *op)
{
    if (!r || !p)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder or plan", op);
    if (tmm_recorder_device(r) != p->device)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the plan belongs to another device", op);
    return TMM_OK;
}

/* One chunk: output channel rows [r0, r0 + rows), and the activations of
 * the batches its halo touches bound from batch b0. */
typedef struct chunk {
    uint64_t r0, rows, b0;
    tmm_view x, y;          /* the input (u or gy) and output (y or du) bindings */
    uint32_t base_x, base_y;
    tmm_view u;             /* backward: u for dw */
    uint32_t base_u;
} chunk;

static tmm_status bind_chunk(tmm_recorder *r, const tmm_toeplitz_fft *p, const char *op, uint64_t r0, tmm_view x,
                             const char *xname, tmm_view y, const char *yname, tmm_view u, chunk *c)
{
    uint64_t last;
    c->r0 = r0;
    c->rows = p->cr < p->bd - r0 ? p->cr : p->bd - r0;
    chunk_batches(p, r0, c->rows, &c->b0, &last);
    const uint64_t seq = (uint64_t)p->n * p->d, first = c->b0 * seq, count = (last - c->b0 + 1) * seq;
    TMM_TRY(bind(r, op, xname, x, first, count, &c->x, &c->base_x));
    if (y.size)
        TMM_TRY(bind(r, op, yname, y, first, count, &c->y, &c->base_y));
    if (u.size)
        TMM_TRY(bind(r, op, "u", u, first, count, &c->u, &c->base_u));
    return TMM_OK;
}

/* ---- kernels ------------------------------------------------------------- */

typedef struct pack_push {
    uint32_t N, n, rows;
    int32_t grow0;
    uint32_t nrows, d, bbase, base_x, row0;
} pack_push;

typedef struct unpack_push {
    uint32_t N, n, rows, grow0, d, row0, bbase, dg, add_beta, base_beta, base_y;
} unpack_push;

typedef struct mul_push {
    uint32_t M, d, dg, nrows, r0, xrow0, wrow0;
} mul_push;

typedef struct dw_push {
    uint32_t M, d, dg, K, r0, urow0, grow0, l0, l1, accumulate;
} dw_push;

typedef struct dbeta_push {
    uint32_t n, d, dg, j0, j1, accumulate, base_gy, base_o;
} dbeta_push;

/* The hr rows of a chunk (its channel rows with their halos) of activations
 * [B, n, d] into rows row0.. of R. */
static tmm_status pack_act(tmm_recorder *r, tmm_toeplitz_fft *p, const chunk *c, tmm_view x, uint32_t base_x,
                           uint32_t row0)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_pack, 2, sizeof(pack_push), local_rows, NULL, 0, &pipe));
    pack_push push = { .N = p->N, .n = p->n, .rows = p->hr, .grow0 = (int32_t)c->r0 - (int32_t)p->h,
                       .nrows = (uint32_t)p->bd, .d = p->d, .bbase = (uint32_t)c->b0, .base_x = base_x,
                       .row0 = row0 };
    tmm_arg args[2] = { tmm_in(x), tmm_out(real_view(p, row0 + p->hr)) };
    return tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(p->hr, local_rows[0]), tmm_div_up(p->N, TB), 1);
}

/* w [G*K, n] into rows hr.. of R. */
static tmm_status pack_w(tmm_recorder *r, tmm_toeplitz_fft *p, tmm_view w, uint32_t base_w)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_pack, 2, sizeof(pack_push), local_rows, NULL, 0, &pipe));
    pack_push push = { .N = p->N, .n = p->n, .rows = (uint32_t)p->gk, .nrows = (uint32_t)p->gk, .d = 1,
                       .base_x = base_w, .row0 = p->hr };
    tmm_arg args[2] = { tmm_in(w), tmm_out(real_view(p, p->hr + p->gk)) };
    return tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(p->gk, local_rows[0]), tmm_div_up(p->N, TB), 1);
}

/* Rows 0.. of R cropped to n into the chunk's rows of activations [B, n, d]
 * (plus beta when beta is not NULL). */
static tmm_status unpack_act(tmm_recorder *r, tmm_toeplitz_fft *p, const chunk *c, const tmm_view *beta,
                             uint32_t base_beta)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_unpack, 3, sizeof(unpack_push), local_rows, NULL, 0, &pipe));
    unpack_push push = { .N = p->N, .n = p->n, .rows = (uint32_t)c->rows, .grow0 = (uint32_t)c->r0, .d = p->d,
                         .bbase = (uint32_t)c->b0, .dg = p->dg, .add_beta = beta != NULL, .base_beta = base_beta,
                         .base_y = c->base_y };
    tmm_view src = real_view(p, p->cr);
    tmm_arg args[3] = { tmm_in(src), tmm_in(beta ? *beta : src), tmm_out(c->y) };
    return tmm_record_dispatch(r, pipe, args, 3, &push, tmm_div_up(c->rows, local_rows[0]), tmm_div_up(p->n, TB), 1);
}

static tmm_status unpack_w(tmm_recorder *r, tmm_toeplitz_fft *p, tmm_view dst, uint32_t base_dst)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_unpack, 3, sizeof(unpack_push), local_rows, NULL, 0, &pipe));
    unpack_push push = { .N = p->N, .n = p->n, .rows = (uint32_t)p->gk, .d = 1, .dg = 1, .base_y = base_dst };
    tmm_view src = real_view(p, p->gk);
    tmm_arg args[3] = { tmm_in(src), tmm_in(src), tmm_out(dst) };
    return tmm_record_dispatch(r, pipe, args, 3, &push, tmm_div_up(p->gk, local_rows[0]), tmm_div_up(p->n, TB), 1);
}

/* The chunk's spectral products into C2 (all cr rows: the inverse reads them). */
static tmm_status spectral_mul(tmm_recorder *r, tmm_toeplitz_fft *p, const chunk *c, uint32_t conj, uint64_t c_rows)
{
    tmm_pipeline *pipe;
    const uint32_t spec[2] = { p->K, conj };
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_mul, 2, sizeof(mul_push), local_1d, spec, 2, &pipe));
    mul_push push = { .M = p->M, .d = p->d, .dg = p->dg, .nrows = (uint32_t)p->bd, .r0 = (uint32_t)c->r0,
                      .wrow0 = p->hr };
    tmm_arg args[2] = { tmm_in(complex_view(p->C, p, c_rows)), tmm_out(complex_view(p->C2, p, p->cr)) };
    return tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(p->M, TMM_WG_1D), p->cr, 1);
}

/* ---- forward ------------------------------------------------------------- */

tmm_status tmm_toeplitz_fft_record_forward(tmm_recorder *r, tmm_toeplitz_fft *p, tmm_view u, tmm_view w,
                                           tmm_view beta, tmm_view y)
{
    static const char op[] = "toeplitz_fft_forward";
    TMM_TRY(check_plan(r, p, op));
    const uint64_t act = p->bd * p->n;
    if (act == 0)
        return TMM_OK; /* y is empty */
    tmm_op_span s[4] = { { "u", u, act }, { "w", w, p->gk * p->n }, { "beta", beta, (uint64_t)p->G * p->n },
                  { "y", y, act } };
    for (int i = 0; i < 4; i++)
        TMM_TRY(tmm_op_need_floats(op, s[i].name, s[i].v, s[i].n));
    TMM_TRY(tmm_op_no_overlap(op, &s[3], s, 4));
    tmm_view bw = { 0 }, bb = { 0 };
    uint32_t base_w, base_b;
    TMM_TRY(bind(r, op, "w", w, 0, p->gk * p->n, &bw, &base_w));
    TMM_TRY(bind(r, op, "beta", beta, 0, (uint64_t)p->G * p->n, &bb, &base_b));

    /* R rows: u [0, hr), w [hr, hr + GK) (transformed with every chunk: GK rows) */
    const uint64_t one = p->hr + p->gk;
    const tmm_view none = { 0 };
    TMM_TRY(pack_w(r, p, bw, base_w));
    for (uint64_t r0 = 0; r0 < p->bd; r0 += p->cr) {
        chunk c;
        TMM_TRY(bind_chunk(r, p, op, r0, u, "u", y, "y", none, &c));
        TMM_TRY(pack_act(r, p, &c, c.x, c.base_x, 0));
        TMM_TRY(tmm_record_fft_r2c(r, p->r2c_one, real_view(p, one), complex_view(p->C, p, one)));
        TMM_TRY(spectral_mul(r, p, &c, 0, one));
        TMM_TRY(tmm_record_fft_c2r(r, p->c2r, complex_view(p->C2, p, p->cr), real_view(p, p->cr)));
        TMM_TRY(unpack_act(r, p, &c, &bb, base_b));
    }
    return TMM_OK;
}

/* ---- backward ------------------------------------------------------------ */

/* dbeta from gy in the real domain: per binding of whole batches, passes of
 * at most the device's loop budget of terms; the first pass writes, the rest add. */
static tmm_status record_dbeta(tmm_recorder *r, tmm_toeplitz_fft *p, const char *op, tmm_view gy, tmm_view bdb,
                               uint32_t base_db)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_dbeta, 2, sizeof(dbeta_push), local_1d, NULL, 0, &pipe));
    const tmm_device *dev = tmm_recorder_device(r);
    const uint64_t seq = (uint64_t)p->n * p->d;
    uint64_t per = (dev->info.max_storage_buffer_range - dev->info.min_storage_buffer_offset_alignment) /
                   (seq * sizeof(float)); /* >= 1: set_layout checked that a chunk's batches fit */
    if (per > p->B)
        per = p->B;
    if (per * p->dg > UINT32_MAX)
        per = UINT32_MAX / p->dg;
    const uint32_t budget = loop_budget_of(dev);
    for (uint64_t b0 = 0; b0 < p->B; b0 += per) {
        const uint64_t nb = per < p->B - b0 ? per : p->B - b0, terms = nb * p->dg;
        tmm_view bgy = { 0 };
        uint32_t base_gy = 0;
        TMM_TRY(bind(r, op, "gy", gy, b0 * seq, nb * seq, &bgy, &base_gy));
        for (uint64_t j0 = 0; j0 < terms; j0 += budget) {
            const uint32_t acc = b0 > 0 || j0 > 0;
            dbeta_push push = { .n = p->n, .d = p->d, .dg = p->dg, .j0 = (uint32_t)j0,
                                .j1 = (uint32_t)(j0 + budget < terms ? j0 + budget : terms), .accumulate = acc,
                                .base_gy = base_gy, .base_o = base_db };
            tmm_arg args[2] = { tmm_in(bgy), acc ? tmm_inout(bdb) : tmm_out(bdb) };
            TMM_TRY(tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(p->n, TMM_WG_1D), p->G, 1));
        }
    }
    return TMM_OK;
}

/* The dw spectra of one chunk (into CW), passes of at most the loop budget of rows;
 * the first chunk's first pass writes, the rest add. */
static tmm_status chunk_dw(tmm_recorder *r, tmm_toeplitz_fft *p, const chunk *c)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_dw, 2, sizeof(dw_push), local_1d, NULL, 0, &pipe));
    const uint64_t two = 2ull * p->hr + p->gk;
    const uint32_t budget = loop_budget_of(tmm_recorder_device(r));
    for (uint64_t l0 = 0; l0 < c->rows; l0 += budget) {
        const uint32_t l1 = (uint32_t)(l0 + budget < c->rows ? l0 + budget : c->rows);
        const uint32_t acc = c->r0 > 0 || l0 > 0;
        dw_push push = { .M = p->M, .d = p->d, .dg = p->dg, .K = p->K, .r0 = (uint32_t)c->r0,
                         .urow0 = p->hr + (uint32_t)p->gk, .l0 = (uint32_t)l0, .l1 = l1, .accumulate = acc };
        tmm_view o = complex_view(p->CW, p, p->gk);
        tmm_arg args[2] = { tmm_in(complex_view(p->C, p, two)), acc ? tmm_inout(o) : tmm_out(o) };
        TMM_TRY(tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(p->M, TMM_WG_1D), (uint32_t)p->gk, 1));
    }
    return TMM_OK;
}

tmm_status tmm_toeplitz_fft_record_backward(tmm_recorder *r, tmm_toeplitz_fft *p, uint32_t flags, tmm_view u,
                                            tmm_view w, tmm_view gy, tmm_view du, tmm_view dw, tmm_view dbeta)
{
    static const char op[] = "toeplitz_fft_backward";
    TMM_TRY(check_plan(r, p, op));
    if (flags & ~(TMM_TOEPLITZ_SKIP_DU | TMM_TOEPLITZ_SKIP_PARAMS))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", op, flags);
    const bool want_du = !(flags & TMM_TOEPLITZ_SKIP_DU), want_params = !(flags & TMM_TOEPLITZ_SKIP_PARAMS);
    const uint64_t act = p->bd * p->n, nw = p->gk * p->n, nb = (uint64_t)p->G * p->n;
    tmm_op_span s[6] = {
        { "u", u, want_params ? act : 0 },
        { "w", w, want_du && act ? nw : 0 },
        { "gy", gy, want_du || want_params ? act : 0 },
        { "du", du, want_du ? act : 0 },
        { "dw", dw, want_params ? nw : 0 },
        { "dbeta", dbeta, want_params ? nb : 0 },
    };
    for (int i = 0; i < 6; i++)
        if (s[i].n)
            TMM_TRY(tmm_op_need_floats(op, s[i].name, s[i].v, s[i].n));
    for (int i = 3; i < 6; i++)
        TMM_TRY(tmm_op_no_overlap(op, &s[i], s, 6));
    if (want_params && p->n && act == 0) {
        /* no terms: the gradients are zero */
        TMM_TRY(tmm_op_fill(r, dw, (uint32_t)nw, 0.0f));
        return tmm_op_fill(r, dbeta, (uint32_t)nb, 0.0f);
    }
    if (act == 0 || (!want_du && !want_params))
        return TMM_OK;

    tmm_view bw = { 0 }, bdw = { 0 }, bdb = { 0 };
    uint32_t base_w = 0, base_dw = 0, base_db = 0;
    if (want_du)
        TMM_TRY(bind(r, op, "w", w, 0, nw, &bw, &base_w));
    if (want_params) {
        TMM_TRY(bind(r, op, "dw", dw, 0, nw, &bdw, &base_dw));
        TMM_TRY(bind(r, op, "dbeta", dbeta, 0, nb, &bdb, &base_db));
    }

    /* R rows: gy [0, hr), w [hr, hr + GK), u [hr + GK, 2hr + GK). Every row
     * transformed is written first (w's as zeros when du is skipped): VkFFT
     * may transform real rows in pairs, and garbage in one would spoil the
     * other. */
    const uint64_t one = p->hr + p->gk, two = 2ull * p->hr + p->gk, rows = want_params ? two : one;
    const tmm_view none = { 0 };
    if (want_params)
        TMM_TRY(record_dbeta(r, p, op, gy, bdb, base_db));
    if (want_du)
        TMM_TRY(pack_w(r, p, bw, base_w));
    else
        TMM_TRY(tmm_record_fill_u32(r, tmm_sub(p->R, tmm_fft_real_bytes(p->N, p->hr),
                                               tmm_fft_real_bytes(p->N, (uint32_t)p->gk)), 0));
    for (uint64_t r0 = 0; r0 < p->bd; r0 += p->cr) {
        chunk c;
        TMM_TRY(bind_chunk(r, p, op, r0, gy, "gy", want_du ? du : none, "du", want_params ? u : none, &c));
        TMM_TRY(pack_act(r, p, &c, c.x, c.base_x, 0));
        if (want_params)
            TMM_TRY(pack_act(r, p, &c, c.u, c.base_u, (uint32_t)one));
        TMM_TRY(tmm_record_fft_r2c(r, want_params ? p->r2c_two : p->r2c_one, real_view(p, rows),
                                   complex_view(p->C, p, rows)));
        if (want_params)
            TMM_TRY(chunk_dw(r, p, &c));
        if (want_du) {
            TMM_TRY(spectral_mul(r, p, &c, 1, rows));
            TMM_TRY(tmm_record_fft_c2r(r, p->c2r, complex_view(p->C2, p, p->cr), real_view(p, p->cr)));
            TMM_TRY(unpack_act(r, p, &c, NULL, 0));
        }
    }
    if (want_params) {
        TMM_TRY(tmm_record_fft_c2r(r, p->dw_c2r, complex_view(p->CW, p, p->gk), real_view(p, p->gk)));
        TMM_TRY(unpack_w(r, p, bdw, base_dw));
    }
    return TMM_OK;
}
