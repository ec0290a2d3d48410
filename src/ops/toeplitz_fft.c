/* FFT implementation of the causal Toeplitz op: host side (see
 * toeplitz_fft.h for the layout, shaders/toeplitz_fft_*.comp for the
 * kernels, runtime/fft.h for the VkFFT plans). */
#include "toeplitz_fft.h"

#include <stdlib.h>

#include "fft.h"
#include "op_util.h"

#define LOOP_BUDGET 4096u /* TMM_MAX_LOOP in shaders/loop_limit.glsl */

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };

static uint32_t loop_budget = LOOP_BUDGET;

void tmm_toeplitz_fft_set_loop_budget(uint32_t terms)
{
    loop_budget = terms == 0 || terms > LOOP_BUDGET ? LOOP_BUDGET : terms;
}

struct tmm_toeplitz_fft {
    tmm_device *device;
    uint32_t B, n, d, G, K, dg;
    uint32_t N, M;
    uint64_t bd, gk;         /* B*d channel rows, G*K w rows */
    tmm_buffer *R, *C, *C2;  /* real rows, their spectra, products */
    tmm_fft_plan *fwd_r2c;   /* Bd + GK rows: R -> C */
    tmm_fft_plan *fwd_c2r;   /* Bd rows: C2 -> R */
    tmm_fft_plan *bwd_r2c;   /* 2Bd + GK rows: R -> C */
    tmm_fft_plan *bwd_c2r;   /* Bd + GK rows: C2 -> R */
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
    tmm_fft_plan_destroy(p->fwd_r2c);
    tmm_fft_plan_destroy(p->fwd_c2r);
    tmm_fft_plan_destroy(p->bwd_r2c);
    tmm_fft_plan_destroy(p->bwd_c2r);
    tmm_buffer_destroy(p->R);
    tmm_buffer_destroy(p->C);
    tmm_buffer_destroy(p->C2);
    free(p);
}

uint32_t tmm_toeplitz_fft_length(const tmm_toeplitz_fft *p) { return p ? p->N : 0; }

/* The shape fields of a plan, from a checked descriptor. */
static void set_shape(tmm_toeplitz_fft *p, const tmm_toeplitz_desc *desc)
{
    p->B = desc->batch;
    p->n = desc->n;
    p->d = desc->d;
    p->G = desc->groups ? desc->groups : 1;
    p->K = desc->taps ? desc->taps : 1;
    p->dg = p->d / p->G;
    p->bd = (uint64_t)p->B * p->d;
    p->gk = (uint64_t)p->G * p->K;
}

/* N and M of a non-empty shape; false when n is too long for the FFT path. */
static bool set_length(tmm_toeplitz_fft *p)
{
    if (p->n > UINT32_MAX / 2)
        return false;
    p->N = tmm_fft_good_length(2 * p->n - 1);
    p->M = tmm_fft_complex_count(p->N);
    return p->N != 0;
}

/* Bytes of `rows` spectra (R is as large as C: VkFFT binds that much of it). */
static uint64_t spectra_bytes(const tmm_toeplitz_fft *p, uint64_t rows) { return (uint64_t)p->M * rows * 8; }

uint64_t tmm_toeplitz_fft_planned_bytes(const tmm_toeplitz_desc *desc)
{
    if (!desc)
        return 0;
    tmm_toeplitz_desc shape = *desc;
    shape.impl = TMM_TOEPLITZ_DIRECT; /* shape checks only */
    tmm_toeplitz_fft p = { 0 };
    if (tmm_toeplitz_check(NULL, &shape) != TMM_OK)
        return 0;
    set_shape(&p, desc);
    if (p.bd * p.n == 0 || !set_length(&p))
        return 0;
    return 2 * spectra_bytes(&p, 2 * p.bd + p.gk) + spectra_bytes(&p, p.bd + p.gk);
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
    if (!set_length(p)) {
        tmm_toeplitz_fft_destroy(p);
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: n = %u is too long for the FFT path", op, desc->n);
    }
    const uint64_t rows = 2 * p->bd + p->gk, rows2 = p->bd + p->gk;
    const uint64_t cbytes = spectra_bytes(p, rows), c2bytes = spectra_bytes(p, rows2);
    const uint64_t range = device->info.max_storage_buffer_range;
    if (rows > UINT32_MAX || cbytes > range || (uint64_t)p->N * rows > UINT32_MAX) {
        tmm_toeplitz_fft_destroy(p);
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the padded rows (%llu rows of %u complex numbers, %llu bytes) "
                        "exceed the device's maxStorageBufferRange (%llu bytes); use the direct implementation "
                        "or a smaller batch", op, (unsigned long long)rows, p->M, (unsigned long long)cbytes,
                        (unsigned long long)range);
    }
    tmm_status s = tmm_buffer_create(device, cbytes, TMM_MEMORY_DEVICE, &p->R);
    if (s == TMM_OK)
        s = tmm_buffer_create(device, cbytes, TMM_MEMORY_DEVICE, &p->C);
    if (s == TMM_OK)
        s = tmm_buffer_create(device, c2bytes, TMM_MEMORY_DEVICE, &p->C2);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)(p->bd + p->gk), real_view(p, p->bd + p->gk),
                                complex_view(p->C, p, p->bd + p->gk), &p->fwd_r2c);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)p->bd, real_view(p, p->bd), complex_view(p->C2, p, p->bd),
                                &p->fwd_c2r);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)rows, real_view(p, rows), complex_view(p->C, p, rows),
                                &p->bwd_r2c);
    if (s == TMM_OK)
        s = tmm_fft_plan_create(device, p->N, (uint32_t)rows2, real_view(p, rows2), complex_view(p->C2, p, rows2),
                                &p->bwd_c2r);
    if (s != TMM_OK) {
        tmm_toeplitz_fft_destroy(p);
        return s;
    }
    *out = p;
    return TMM_OK;
}

/* ---- view checks and bindings -------------------------------------------- */



/* count floats of v, bound from the largest aligned offset at or before it;
 * *base is the view's element offset in the binding. Fails beyond
 * maxStorageBufferRange. */
static tmm_status bind(const tmm_recorder *r, const char *op, const char *name, tmm_view v, uint64_t count,
                       tmm_view *out, uint32_t *base)
{
    const tmm_device *dev = tmm_recorder_device(r);
    uint64_t align = dev->info.min_storage_buffer_offset_alignment;
    if (align < sizeof(float))
        align = sizeof(float);
    uint64_t at = v.offset / align * align;
    *base = (uint32_t)((v.offset - at) / sizeof(float));
    tmm_view b = { v.buffer, at, v.offset - at + count * sizeof(float) };
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

/* ---- kernels ------------------------------------------------------------- */

typedef struct pack_push {
    uint32_t total, N, n, rdiv, s_hi, s_lo, s_t, base_x, row0;
} pack_push;

typedef struct unpack_push {
    uint32_t total, N, n, rdiv, s_hi, s_lo, s_t, row0, dg, add_beta, base_beta, base_y;
} unpack_push;

typedef struct mul_push {
    uint32_t total, M, d, dg, xrow0, wrow0, orow0;
} mul_push;

typedef struct dw_push {
    uint32_t total, M, d, dg, K, urow0, grow0, orow0, j0, j1, accumulate;
} dw_push;

typedef struct dbeta_push {
    uint32_t total, N, n, d, dg, grow0, j0, j1, accumulate, base_o;
} dbeta_push;

/* Activations [B, n, d] into rows row0 + b*d + c of R. */
static tmm_status pack_act(tmm_recorder *r, tmm_toeplitz_fft *p, tmm_view x, tmm_view bound, uint32_t base,
                           uint32_t row0)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_pack, 2, sizeof(pack_push), local_1d, NULL, 0, &pipe));
    pack_push push = { (uint32_t)(p->bd * p->N), p->N, p->n, p->d, p->n * p->d, 1, p->d, base, row0 };
    (void)x;
    tmm_arg args[2] = { tmm_in(bound), tmm_out(real_view(p, row0 + p->bd)) };
    return tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(push.total, TMM_WG_1D), 1, 1);
}

/* w [G*K, n] into rows row0 + g*K + a of R. */
static tmm_status pack_w(tmm_recorder *r, tmm_toeplitz_fft *p, tmm_view bound, uint32_t base, uint32_t row0)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_pack, 2, sizeof(pack_push), local_1d, NULL, 0, &pipe));
    pack_push push = { (uint32_t)(p->gk * p->N), p->N, p->n, 1, p->n, 0, 1, base, row0 };
    tmm_arg args[2] = { tmm_in(bound), tmm_out(real_view(p, row0 + p->gk)) };
    return tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(push.total, TMM_WG_1D), 1, 1);
}

/* Rows row0.. of R cropped to n into activations [B, n, d] (plus beta when
 * beta_bound is not NULL). */
static tmm_status unpack_act(tmm_recorder *r, tmm_toeplitz_fft *p, uint32_t row0, const tmm_view *beta_bound,
                             uint32_t base_beta, tmm_view dst, uint32_t base_dst)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_unpack, 3, sizeof(unpack_push), local_1d, NULL, 0, &pipe));
    unpack_push push = { (uint32_t)(p->bd * p->n), p->N, p->n, p->d, p->n * p->d, 1, p->d, row0, p->dg,
                         beta_bound != NULL, base_beta, base_dst };
    tmm_view src = real_view(p, row0 + p->bd);
    tmm_arg args[3] = { tmm_in(src), tmm_in(beta_bound ? *beta_bound : src), tmm_out(dst) };
    return tmm_record_dispatch(r, pipe, args, 3, &push, tmm_div_up(push.total, TMM_WG_1D), 1, 1);
}

static tmm_status unpack_w(tmm_recorder *r, tmm_toeplitz_fft *p, uint32_t row0, tmm_view dst, uint32_t base_dst)
{
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_unpack, 3, sizeof(unpack_push), local_1d, NULL, 0, &pipe));
    unpack_push push = { (uint32_t)(p->gk * p->n), p->N, p->n, 1, p->n, 0, 1, row0, 1, 0, 0, base_dst };
    tmm_view src = real_view(p, row0 + p->gk);
    tmm_arg args[3] = { tmm_in(src), tmm_in(src), tmm_out(dst) };
    return tmm_record_dispatch(r, pipe, args, 3, &push, tmm_div_up(push.total, TMM_WG_1D), 1, 1);
}

static tmm_status spectral_mul(tmm_recorder *r, tmm_toeplitz_fft *p, uint32_t conj, uint32_t xrow0, uint32_t wrow0,
                               uint64_t c_rows, uint64_t c2_rows)
{
    tmm_pipeline *pipe;
    const uint32_t spec[2] = { p->K, conj };
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_mul, 2, sizeof(mul_push), local_1d, spec, 2, &pipe));
    mul_push push = { (uint32_t)(p->bd * p->M), p->M, p->d, p->dg, xrow0, wrow0, 0 };
    tmm_arg args[2] = { tmm_in(complex_view(p->C, p, c_rows)), tmm_out(complex_view(p->C2, p, c2_rows)) };
    return tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(push.total, TMM_WG_1D), 1, 1);
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
    tmm_view bu, bw, bb, by;
    uint32_t base_u, base_w, base_b, base_y;
    TMM_TRY(bind(r, op, "u", u, act, &bu, &base_u));
    TMM_TRY(bind(r, op, "w", w, p->gk * p->n, &bw, &base_w));
    TMM_TRY(bind(r, op, "beta", beta, (uint64_t)p->G * p->n, &bb, &base_b));
    TMM_TRY(bind(r, op, "y", y, act, &by, &base_y));

    const uint64_t rows = p->bd + p->gk;
    TMM_TRY(pack_act(r, p, u, bu, base_u, 0));
    TMM_TRY(pack_w(r, p, bw, base_w, (uint32_t)p->bd));
    TMM_TRY(tmm_record_fft_r2c(r, p->fwd_r2c, real_view(p, rows), complex_view(p->C, p, rows)));
    TMM_TRY(spectral_mul(r, p, 0, 0, (uint32_t)p->bd, rows, p->bd));
    TMM_TRY(tmm_record_fft_c2r(r, p->fwd_c2r, complex_view(p->C2, p, p->bd), real_view(p, p->bd)));
    return unpack_act(r, p, 0, &bb, base_b, by, base_y);
}

/* ---- backward ------------------------------------------------------------ */

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

    tmm_view bu = { 0 }, bw = { 0 }, bgy, bdu = { 0 }, bdw = { 0 }, bdb = { 0 };
    uint32_t base_u = 0, base_w = 0, base_gy, base_du = 0, base_dw = 0, base_db = 0;
    TMM_TRY(bind(r, op, "gy", gy, act, &bgy, &base_gy));
    if (want_du) {
        TMM_TRY(bind(r, op, "w", w, nw, &bw, &base_w));
        TMM_TRY(bind(r, op, "du", du, act, &bdu, &base_du));
    }
    if (want_params) {
        TMM_TRY(bind(r, op, "u", u, act, &bu, &base_u));
        TMM_TRY(bind(r, op, "dw", dw, nw, &bdw, &base_dw));
        TMM_TRY(bind(r, op, "dbeta", dbeta, nb, &bdb, &base_db));
    }

    /* R rows: gy [0, Bd), u [Bd, 2Bd), w [2Bd, 2Bd + GK) (unused parts are
     * left as they are: their spectra are not read) */
    const uint32_t row_u = (uint32_t)p->bd, row_w = (uint32_t)(2 * p->bd);
    const uint64_t rows = 2 * p->bd + p->gk, rows2 = p->bd + p->gk;
    TMM_TRY(pack_act(r, p, gy, bgy, base_gy, 0));
    if (want_params)
        TMM_TRY(pack_act(r, p, u, bu, base_u, row_u));
    if (want_du)
        TMM_TRY(pack_w(r, p, bw, base_w, row_w));

    if (want_params) {
        /* dbeta from the packed gy rows, passes of at most LOOP_BUDGET terms */
        tmm_pipeline *pipe;
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_dbeta, 2, sizeof(dbeta_push), local_1d, NULL, 0, &pipe));
        const uint64_t terms = (uint64_t)p->B * p->dg;
        for (uint64_t j0 = 0; j0 < terms; j0 += loop_budget) {
            uint64_t j1 = j0 + loop_budget < terms ? j0 + loop_budget : terms;
            dbeta_push push = { (uint32_t)nb, p->N, p->n, p->d, p->dg, 0, (uint32_t)j0, (uint32_t)j1, j0 > 0,
                                base_db };
            tmm_arg args[2] = { tmm_in(real_view(p, p->bd)), j0 > 0 ? tmm_inout(bdb) : tmm_out(bdb) };
            TMM_TRY(tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(nb, TMM_WG_1D), 1, 1));
        }
    }

    /* The whole R (unused rows included) goes through one R2C: rows the
     * flags skip hold stale data whose spectra nobody reads. */
    TMM_TRY(tmm_record_fft_r2c(r, p->bwd_r2c, real_view(p, rows), complex_view(p->C, p, rows)));
    if (want_du)
        TMM_TRY(spectral_mul(r, p, 1, 0, row_w, rows, rows2));
    if (want_params) {
        tmm_pipeline *pipe;
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fft_dw, 2, sizeof(dw_push), local_1d, NULL, 0, &pipe));
        const uint64_t terms = (uint64_t)p->B * p->dg, total = p->gk * p->M;
        for (uint64_t j0 = 0; j0 < terms; j0 += loop_budget) {
            uint64_t j1 = j0 + loop_budget < terms ? j0 + loop_budget : terms;
            dw_push push = { (uint32_t)total, p->M, p->d, p->dg, p->K, row_u, 0, (uint32_t)p->bd, (uint32_t)j0,
                             (uint32_t)j1, j0 > 0 };
            tmm_view o = complex_view(p->C2, p, rows2);
            tmm_arg args[2] = { tmm_in(complex_view(p->C, p, rows)), j0 > 0 ? tmm_inout(o) : tmm_out(o) };
            TMM_TRY(tmm_record_dispatch(r, pipe, args, 2, &push, tmm_div_up(total, TMM_WG_1D), 1, 1));
        }
    }
    TMM_TRY(tmm_record_fft_c2r(r, p->bwd_c2r, complex_view(p->C2, p, rows2), real_view(p, rows2)));
    if (want_du)
        TMM_TRY(unpack_act(r, p, 0, NULL, 0, bdu, base_du));
    if (want_params)
        TMM_TRY(unpack_w(r, p, (uint32_t)p->bd, bdw, base_dw));
    return TMM_OK;
}
