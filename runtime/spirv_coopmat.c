#include "spirv_coopmat.h"

#include <stdlib.h>
#include <string.h>

/* Opcodes and enumerants (SPIR-V unified1 grammar; SPV_NV_cooperative_matrix
 * and SPV_KHR_cooperative_matrix). */
enum {
    OP_UNDEF = 1, OP_EXTENSION = 10, OP_EXT_INST = 12, OP_CAPABILITY = 17, OP_TYPE_INT = 21, OP_TYPE_FLOAT = 22,
    OP_CONSTANT_TRUE = 41,
    OP_CONSTANT_FALSE = 42, OP_CONSTANT = 43, OP_CONSTANT_COMPOSITE = 44, OP_LOAD = 61,
    OP_COMPOSITE_CONSTRUCT = 80, OP_COMPOSITE_EXTRACT = 81, OP_COPY_OBJECT = 83, OP_FCONVERT = 115,
    OP_FNEGATE = 127, OP_FADD = 129, OP_FSUB = 131, OP_FMUL = 133, OP_FDIV = 136, OP_MATRIX_TIMES_SCALAR = 143,
    OP_SELECT = 169, OP_PHI = 245,
    OP_TYPE_CM_NV = 5358, OP_LOAD_CM_NV = 5359, OP_STORE_CM_NV = 5360, OP_MULADD_CM_NV = 5361,
    OP_LENGTH_CM_NV = 5362,
    OP_TYPE_CM_KHR = 4456, OP_LOAD_CM_KHR = 4457, OP_STORE_CM_KHR = 4458, OP_MULADD_CM_KHR = 4459,
    OP_LENGTH_CM_KHR = 4460,
    OP_TYPE_VECTOR = 23, OP_SPEC_CONSTANT = 50, OP_DOT = 148,
    CAP_CM_NV = 5357, CAP_CM_KHR = 6022, CAP_BF16_TYPE = 5116, CAP_BF16_CM = 5118, ENCODING_BF16 = 0,
};
/* Use (matrix A, B, accumulator) and MemoryLayout (row, column major) values. */
enum { USE_A = 0, USE_B = 1, USE_ACC = 2, N_CONSTS = 3 };

static const char ext_nv[] = "SPV_NV_cooperative_matrix", ext_khr[] = "SPV_KHR_cooperative_matrix",
                  ext_bf16[] = "SPV_KHR_bfloat16";

/* Opcodes laid out as (result type, result, ...) whose results may be the
 * operands of a multiply-add: how the rewrite finds an operand's type. */
static bool typed_result(uint32_t op)
{
    switch (op) {
    case OP_UNDEF: case OP_CONSTANT_TRUE: case OP_CONSTANT_FALSE: case OP_CONSTANT: case OP_CONSTANT_COMPOSITE:
    case OP_LOAD: case OP_COMPOSITE_CONSTRUCT: case OP_COMPOSITE_EXTRACT: case OP_COPY_OBJECT: case OP_FCONVERT:
    case OP_FNEGATE: case OP_FADD: case OP_FSUB: case OP_FMUL: case OP_FDIV: case OP_MATRIX_TIMES_SCALAR:
    case OP_SELECT: case OP_PHI: case OP_LOAD_CM_NV: case OP_MULADD_CM_NV:
        return true;
    }
    return false;
}

/* What the first pass learns, indexed by id. */
typedef struct scan {
    uint32_t bound;
    uint32_t *type_of; /* result type of a typed_result instruction, 0 unknown */
    uint8_t *role;     /* per matrix type: bit 1 << USE_x for each role it plays */
    int8_t *boolean;   /* OpConstantTrue 1, OpConstantFalse 0, else -1 */
    uint32_t half_type;  /* OpTypeFloat 16 */
    uint32_t uint_type;  /* OpTypeInt 32 0 */
    size_t uint_at;      /* the word after it, where the new constants go */
    uint32_t n_types;    /* OpTypeCooperativeMatrixNV instructions */
} scan;

static bool ext_is(const uint32_t *w, uint32_t len, const char *s)
{
    const size_t n = strlen(s);
    return (len - 1) * 4 > n && memcmp(w + 1, s, n + 1) == 0;
}

static tmm_status play(scan *sc, uint32_t id, int use, const char *name)
{
    const uint32_t t = id < sc->bound ? sc->type_of[id] : 0;
    if (!t || t >= sc->bound)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: cannot tell the type of cooperative-matrix operand %%%u", name,
                        id);
    sc->role[t] |= (uint8_t)(1u << use);
    return TMM_OK;
}

/* Pass 1: types, constants and the role of each matrix type. */
static tmm_status scan_module(const uint32_t *code, size_t n, const char *name, scan *sc)
{
    bool uses_nv = false;
    for (size_t i = 5; i < n;) {
        const uint32_t len = code[i] >> 16, op = code[i] & 0xffffu;
        if (len == 0 || i + len > n)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: SPIR-V instruction at word %zu overruns the module", name,
                            i);
        const uint32_t *w = code + i;
        if (typed_result(op) && len >= 3 && w[2] < sc->bound)
            sc->type_of[w[2]] = w[1];
        if ((op == OP_CONSTANT_TRUE || op == OP_CONSTANT_FALSE) && len == 3 && w[2] < sc->bound)
            sc->boolean[w[2]] = op == OP_CONSTANT_TRUE;
        if (op == OP_TYPE_FLOAT && len == 3 && w[2] == 16)
            sc->half_type = w[1];
        if (op == OP_TYPE_INT && len == 4 && w[2] == 32 && w[3] == 0 && !sc->uint_type) {
            sc->uint_type = w[1];
            sc->uint_at = i + len;
        }
        if (op == OP_CAPABILITY && len == 2 && w[1] == CAP_CM_NV)
            uses_nv = true;
        if (op == OP_TYPE_CM_NV) {
            if (len != 6 || w[1] >= sc->bound)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: malformed OpTypeCooperativeMatrixNV", name);
            sc->n_types++;
        }
        if (op == OP_MULADD_CM_NV) {
            if (len != 6)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: malformed OpCooperativeMatrixMulAddNV", name);
            TMM_TRY(play(sc, w[3], USE_A, name));
            TMM_TRY(play(sc, w[4], USE_B, name));
            TMM_TRY(play(sc, w[5], USE_ACC, name));
            if (w[1] < sc->bound)
                sc->role[w[1]] |= 1u << USE_ACC;
        }
        i += len;
    }
    if (!uses_nv || !sc->n_types)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the module has no NV cooperative matrices to rewrite", name);
    if (!sc->uint_type)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the module declares no 32-bit unsigned int type", name);
    return TMM_OK;
}

/* Arithmetic whose result is the 16-bit float type or a vector of it, and
 * 16-bit constants other than zero: what a switch of that type to bf16
 * would change. */
static tmm_status bf16_sound(const uint32_t *code, size_t n, const char *name, uint32_t half)
{
    uint32_t vec[8], n_vec = 0;
    for (size_t i = 5; i < n; i += code[i] >> 16)
        if ((code[i] & 0xffffu) == OP_TYPE_VECTOR && (code[i] >> 16) == 4 && code[i + 2] == half && n_vec < 8)
            vec[n_vec++] = code[i + 1];
    for (size_t i = 5; i < n; i += code[i] >> 16) {
        const uint32_t len = code[i] >> 16, op = code[i] & 0xffffu, *w = code + i;
        bool typed = len >= 3 && w[1] == half;
        for (uint32_t v = 0; v < n_vec && len >= 3; v++)
            typed = typed || w[1] == vec[v];
        if (!typed)
            continue;
        const bool arith = op == OP_EXT_INST || (op >= OP_FNEGATE && op <= OP_DOT);
        const bool constant = (op == OP_CONSTANT || op == OP_SPEC_CONSTANT) && len == 4 && (w[3] & 0x7fffu) != 0;
        if (arith || constant)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: instruction %u computes in the 16-bit float type or holds a "
                            "16-bit constant; as bf16 it would mean another value", name, op);
    }
    return TMM_OK;
}

/* The Use of a matrix type from its roles; -1 when it plays two. */
static int use_of(uint8_t role)
{
    switch (role) {
    case 1u << USE_A: return USE_A;
    case 1u << USE_B: return USE_B;
    case 0:
    case 1u << USE_ACC: return USE_ACC;
    }
    return -1;
}

/* The layout constant for a load's or store's column-major operand. */
static tmm_status layout(const scan *sc, uint32_t id, const uint32_t consts[N_CONSTS], const char *name,
                         uint32_t *out)
{
    if (id >= sc->bound || sc->boolean[id] < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: a cooperative-matrix load or store whose layout %%%u is not a "
                        "constant bool", name, id);
    *out = consts[sc->boolean[id]]; /* RowMajorKHR 0, ColumnMajorKHR 1 */
    return TMM_OK;
}

/* OpExtension with the name s at o; its length in words. */
static uint32_t put_extension(uint32_t *o, const char *s)
{
    const size_t n = strlen(s) + 1;
    const uint32_t words = 1 + (uint32_t)(n + 3) / 4;
    memset(o, 0, words * 4);
    o[0] = words << 16 | OP_EXTENSION;
    memcpy(o + 1, s, n);
    return words;
}

/* Pass 2: the module again, rewritten into o: one word more per matrix type
 * (its Use), the constants, and room for the longer extension name. */
static tmm_status rewrite(const uint32_t *code, size_t n, const char *name, const scan *sc, bool bf16,
                          uint32_t **out, size_t *on)
{
    uint32_t *o = malloc((n + sc->n_types + 4 * N_CONSTS + 24) * 4);
    if (!o)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    *out = o;
    uint32_t consts[N_CONSTS];
    for (uint32_t v = 0; v < N_CONSTS; v++)
        consts[v] = sc->bound + v;
    memcpy(o, code, 5 * 4);
    o[3] = sc->bound + N_CONSTS;
    size_t k = 5;
    for (size_t i = 5; i < n;) {
        const uint32_t len = code[i] >> 16, op = code[i] & 0xffffu;
        const uint32_t *w = code + i;
        if (op == OP_CAPABILITY && len == 2 && w[1] == CAP_CM_NV) {
            const uint32_t caps[3] = { CAP_CM_KHR, CAP_BF16_TYPE, CAP_BF16_CM };
            for (int c = 0; c < (bf16 ? 3 : 1); c++) {
                o[k++] = code[i];
                o[k++] = caps[c];
            }
        } else if (op == OP_EXTENSION && ext_is(w, len, ext_nv)) {
            k += put_extension(o + k, ext_khr);
            if (bf16)
                k += put_extension(o + k, ext_bf16);
        } else if (bf16 && op == OP_TYPE_FLOAT && w[1] == sc->half_type) {
            const uint32_t t[4] = { 4u << 16 | OP_TYPE_FLOAT, w[1], 16, ENCODING_BF16 };
            memcpy(o + k, t, sizeof t);
            k += 4;
        } else if (op == OP_TYPE_CM_NV) {
            const int use = use_of(sc->role[w[1]]);
            if (use < 0)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: cooperative-matrix type %%%u is used both as A or B and "
                                "in another role; KHR types carry their use, so give each role its own type", name,
                                w[1]);
            o[k++] = 7u << 16 | OP_TYPE_CM_KHR;
            memcpy(o + k, w + 1, 5 * 4);
            k += 5;
            o[k++] = consts[use];
        } else if (op == OP_LOAD_CM_NV || op == OP_STORE_CM_NV) {
            /* load: type, result, pointer, stride, colmajor, [memory operands]
             * store: pointer, object, stride, colmajor, [memory operands]
             * KHR puts the layout before the stride. */
            const uint32_t at = op == OP_LOAD_CM_NV ? 4 : 3;
            if (len < at + 2)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: malformed cooperative-matrix load or store", name);
            o[k] = code[i] & 0xffff0000u;
            o[k] |= op == OP_LOAD_CM_NV ? OP_LOAD_CM_KHR : OP_STORE_CM_KHR;
            memcpy(o + k + 1, w + 1, (at - 1) * 4);
            TMM_TRY(layout(sc, w[at + 1], consts, name, &o[k + at]));
            o[k + at + 1] = w[at];
            memcpy(o + k + at + 2, w + at + 2, (len - at - 2) * 4);
            k += len;
        } else if (op == OP_MULADD_CM_NV || op == OP_LENGTH_CM_NV) {
            o[k] = (code[i] & 0xffff0000u) | (op == OP_MULADD_CM_NV ? OP_MULADD_CM_KHR : OP_LENGTH_CM_KHR);
            memcpy(o + k + 1, w + 1, (len - 1) * 4);
            k += len;
        } else {
            memcpy(o + k, w, len * 4);
            k += len;
        }
        if (i + len == sc->uint_at) /* the Use and layout constants, right after their type */
            for (uint32_t v = 0; v < N_CONSTS; v++) {
                const uint32_t c[4] = { 4u << 16 | OP_CONSTANT, sc->uint_type, consts[v], v };
                memcpy(o + k, c, sizeof c);
                k += 4;
            }
        i += len;
    }
    *on = k;
    return TMM_OK;
}

tmm_status tmm_spirv_coopmat_khr(const uint32_t *code, size_t bytes, const char *name, bool bf16, uint32_t **out,
                                 size_t *out_bytes)
{
    *out = NULL;
    *out_bytes = 0;
    const size_t n = bytes / 4;
    if (bytes % 4 || n < 5 || code[0] != 0x07230203u)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: not a SPIR-V module", name);
    scan sc = { .bound = code[3] };
    if (sc.bound == 0 || sc.bound > (1u << 22))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: SPIR-V id bound %u out of range", name, sc.bound);
    sc.type_of = calloc(sc.bound, sizeof *sc.type_of);
    sc.role = calloc(sc.bound, 1);
    sc.boolean = malloc(sc.bound);
    uint32_t *o = NULL;
    tmm_status s = sc.type_of && sc.role && sc.boolean ? TMM_OK
                                                       : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        memset(sc.boolean, -1, sc.bound);
        s = scan_module(code, n, name, &sc);
    }
    if (s == TMM_OK && bf16 && !sc.half_type)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the module has no 16-bit float type to make bf16", name);
    if (s == TMM_OK && bf16)
        s = bf16_sound(code, n, name, sc.half_type);
    size_t on = 0;
    if (s == TMM_OK)
        s = rewrite(code, n, name, &sc, bf16, &o, &on);
    free(sc.type_of);
    free(sc.role);
    free(sc.boolean);
    if (s != TMM_OK) {
        free(o);
        return s;
    }
    *out = o;
    *out_bytes = on * 4;
    return TMM_OK;
}
