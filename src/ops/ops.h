/* Device ops: each records its kernels into a recorder. Views hold float32
 * elements unless a comment says otherwise. The meaning of every op is its C
 * reference in src/ref/ref.h. */
#ifndef TMM_OPS_H
#define TMM_OPS_H

#include "recorder.h"
#include "tmm/model.h"

/* Loop iterations one shader invocation may make: TMM_MAX_LOOP of
 * shaders/loop_limit.glsl (llvmpipe silently stops loops after 65535). Ops
 * split longer work into passes or segments of at most this many terms. */
#define TMM_MAX_LOOP 4096u

/* x[i] = value, i < n */
tmm_status tmm_op_fill(tmm_recorder *r, tmm_view x, uint32_t n, float value);
/* y[i] = x[i], i < n */
tmm_status tmm_op_copy(tmm_recorder *r, tmm_view x, tmm_view y, uint32_t n);
/* y[i] += a * x[i], i < n */
tmm_status tmm_op_axpy(tmm_recorder *r, float a, tmm_view x, tmm_view y, uint32_t n);

/* 16-bit storage (docs/model.md "Precision and recomputation"): y, (n + 1) / 2
 * uint32 words (tmm_pack16_words), holds x's n floats as fp16 or bf16
 * (format TMM_PRECISION_FP16 or _BF16), element 2i in the low half of word i;
 * rounding to nearest, ties to even; unpack16 converts back exactly. */
uint64_t tmm_pack16_words(uint64_t n);
tmm_status tmm_op_pack16(tmm_recorder *r, tmm_view x, uint64_t n, tmm_precision format, tmm_view y);
tmm_status tmm_op_unpack16(tmm_recorder *r, tmm_view x, uint64_t n, tmm_precision format, tmm_view y);

/* Deterministic sums: a fixed summation order, the same on every run.
 * Long sums run in passes through scratch; *_scratch give its size in floats.
 *   sum:      out[0] = sum of x[0..n)
 *   sum_rows: x is [rows, cols] row-major, out[r] = sum_c x[r, c]
 *   sum_cols: out[c] = sum_r x[r, c] */
tmm_status tmm_op_sum(tmm_recorder *r, tmm_view x, uint32_t n, tmm_view scratch, tmm_view out);
tmm_status tmm_op_sum_rows(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, tmm_view scratch,
                           tmm_view out);
tmm_status tmm_op_sum_cols(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, tmm_view scratch,
                           tmm_view out);
uint64_t tmm_op_sum_scratch(uint32_t n);
uint64_t tmm_op_sum_rows_scratch(uint32_t rows, uint32_t cols);
uint64_t tmm_op_sum_cols_scratch(uint32_t rows, uint32_t cols);

typedef enum tmm_matmul_variant {
    TMM_MATMUL_AUTO = 0,   /* COOPMAT where it applies, else REGISTER on CPU devices, TILED on GPUs */
    TMM_MATMUL_REGISTER,   /* register-blocked, no shared memory (CPU devices) */
    TMM_MATMUL_TILED,      /* shared-memory tiles (GPUs) */
    TMM_MATMUL_COOPMAT,    /* cooperative matrices: A rounded to B's 16-bit format (fp16 or bf16), or both
                              to half_inputs' (docs/gpu.md); AUTO takes it for a 16-bit B, or with
                              half_inputs, where the device has that format's matrices */
} tmm_matmul_variant;

const char *tmm_matmul_variant_name(tmm_matmul_variant v);

/* A bias and an activation applied as C is stored (matmul_common.glsl),
 * with the view `bias` (not added to C):
 *   SILU_GRAD, GELU_GRAD: a gradient, C = (the product) * act'(C + bias), in
 *     place, where C holds the activation's input less its bias;
 *   SILU, GELU: a forward, C = the product and z = act(C + bias), z a second
 *     output laid out as C (tmm_op_matmul_act), as tmm_op_bias_silu_forward
 *     and tmm_op_gelu_forward compute it, to the bit.
 * Needs a bias, no accumulate, and a matmul of one pass (batches that fit a
 * binding each, k within one dispatch's sum: 16384, 2048 for the register
 * kernel's trans_a): otherwise TMM_ERR_UNSUPPORTED. */
typedef enum tmm_matmul_epilogue {
    TMM_MATMUL_EPI_NONE = 0,
    TMM_MATMUL_EPI_SILU_GRAD,
    TMM_MATMUL_EPI_GELU_GRAD,
    TMM_MATMUL_EPI_SILU,
    TMM_MATMUL_EPI_GELU,
} tmm_matmul_epilogue;

/* Whether e is one of the gradient epilogues (which read C). */
bool tmm_matmul_epilogue_is_grad(tmm_matmul_epilogue e);

/* For b in [0, batch):
 *   C_b[m, n] (+)= sum_k op(A_b)[m, k] * op(B_b)[k, n] + bias[n]
 * A_b starts at element b * stride_a of a; op(A) = A ([m, k] row-major) or,
 * with trans_a, Aᵀ where A is stored [k, m]. Likewise B: [k, n] or [n, k].
 * C_b is [m, n] at b * stride_c. Strides may be 0 (broadcast an operand).
 * bias is optional (a view of size 0), length n. accumulate adds to C.
 * lda, ldb, ldc: the elements between consecutive rows of each stored matrix
 * (A's rows are its m rows, or its k rows with trans_a; likewise B); 0 means
 * packed (the stored row length), as BLAS's leading dimensions. */
typedef struct tmm_matmul_desc {
    uint32_t m, n, k;
    bool trans_a, trans_b;
    uint32_t batch;                 /* 0 counts as 1 */
    uint64_t stride_a, stride_b, stride_c;
    bool accumulate;
    tmm_matmul_variant variant;
    uint32_t lda, ldb, ldc;         /* 0: packed */
    tmm_matmul_epilogue epilogue;
    tmm_elem half_inputs;           /* F16 or BF16: A and B may be rounded to that format (16-bit training's
                                       weight gradients, as PyTorch's autocast does): COOPMAT takes an fp32 B,
                                       and AUTO picks it; F32 (0): they may not */
} tmm_matmul_desc;

/* The leading dimensions of desc with 0 resolved to the packed ones. */
void tmm_matmul_leading(const tmm_matmul_desc *desc, uint32_t *lda, uint32_t *ldb, uint32_t *ldc);

tmm_status tmm_op_matmul(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_view a, tmm_view b,
                         tmm_view bias, tmm_view c);
/* tmm_op_matmul with the forward epilogues' second output z (an empty view
 * for every other epilogue). */
tmm_status tmm_op_matmul_act(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_view a, tmm_view b,
                             tmm_view bias, tmm_view c, tmm_view z);

/* A Linear layer of `rows` rows, W [out, in]:
 *   linear:    y [rows, out] (+)= x [rows, in] · Wᵀ (+ bias [out], optional: an empty view)
 *   linear_dx: dx [rows, in] (+)= dy [rows, out] · W
 *   linear_dw: dW [out, in] = dyᵀ · x (half F16 or BF16: dy and x may be rounded to it, the desc's
 *              half_inputs; F32: they may not) */
tmm_status tmm_op_linear(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                         tmm_view bias, tmm_view y, bool accumulate);
tmm_status tmm_op_linear_dx(tmm_recorder *r, tmm_view dy, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                            tmm_view dx, bool accumulate);
tmm_status tmm_op_linear_dw(tmm_recorder *r, tmm_view dy, tmm_view x, uint32_t rows, uint32_t in, uint32_t out,
                            tmm_view dw, tmm_elem half);

/* The MLP's first layer with its bias b [out] and activation in one matmul:
 * a [rows, out] = x [rows, in] · Wᵀ (without b, for the backward) and
 * z [rows, out] = act(a + b), act TMM_MATMUL_EPI_SILU or _GELU. `fits` is
 * false when the matmul needs more than one pass; then the caller takes
 * linear and the activation's forward (the same values). */
bool tmm_op_linear_act_fits(const tmm_device *dev, uint32_t rows, uint32_t in, uint32_t out);
tmm_status tmm_op_linear_act(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                             tmm_view b, tmm_matmul_epilogue act, tmm_view a, tmm_view z);

/* The MLP's gradient through its first layer's bias b [in] and activation, in
 * one matmul: da [rows, in] = (dy [rows, out] · W) * act'(a + b), over a (the
 * activation's input less b) in place. `fits` is false when the matmul needs
 * more than one pass; then the caller takes linear_dx and the activation's
 * backward (the same values). */
bool tmm_op_linear_dx_act_fits(const tmm_device *dev, uint32_t rows, uint32_t in, uint32_t out);
tmm_status tmm_op_linear_dx_act(tmm_recorder *r, tmm_view dy, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                                tmm_view b, tmm_matmul_epilogue act, tmm_view a);

#endif
