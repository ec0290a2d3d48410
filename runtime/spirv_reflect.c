#include "spirv_reflect.h"

#include <stdlib.h>
#include <string.h>

/* The opcodes, decorations and storage classes this reader needs (SPIR-V 1.x spec, section 3). */
enum {
    OP_TYPE_INT = 21, OP_TYPE_FLOAT = 22, OP_TYPE_VECTOR = 23, OP_TYPE_ARRAY = 28, OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32, OP_CONSTANT = 43, OP_VARIABLE = 59, OP_DECORATE = 71, OP_MEMBER_DECORATE = 72,
    DEC_BINDING = 33, DEC_DESCRIPTOR_SET = 34, DEC_OFFSET = 35,
    SC_UNIFORM = 2, SC_PUSH_CONSTANT = 9, SC_STORAGE_BUFFER = 12,
};

/* What the reader keeps per id. */
typedef struct id_info {
    uint32_t op;           /* the instruction that defines it */
    uint32_t a, b;         /* per op: int/float width; vector/array (element type, count id); pointer (class, type);
                              variable (pointer type, storage class); constant value in a */
    uint32_t binding, set; /* decorations, UINT32_MAX when absent */
    const uint32_t *words; /* OpTypeStruct: its member types */
    uint32_t n_words;
    uint32_t max_offset, max_member; /* OpTypeStruct: the member at the largest Offset */
} id_info;

static uint32_t type_size(const id_info *ids, uint32_t bound, uint32_t t, int depth)
{
    if (t >= bound || depth > 8)
        return 0;
    const id_info *i = &ids[t];
    switch (i->op) {
    case OP_TYPE_INT:
    case OP_TYPE_FLOAT: return i->a / 8;
    case OP_TYPE_VECTOR: return i->b * type_size(ids, bound, i->a, depth + 1);
    case OP_TYPE_ARRAY: {
        uint32_t n = i->b < bound && ids[i->b].op == OP_CONSTANT ? ids[i->b].a : 0;
        return n * type_size(ids, bound, i->a, depth + 1);
    }
    case OP_TYPE_STRUCT:
        if (i->max_member >= i->n_words)
            return 0;
        return i->max_offset + type_size(ids, bound, i->words[i->max_member], depth + 1);
    }
    return 0;
}

tmm_status tmm_spirv_reflect(const uint32_t *code, size_t bytes, const char *name, tmm_spirv_iface *out)
{
    memset(out, 0, sizeof *out);
    const size_t n = bytes / 4;
    if (bytes % 4 || n < 5 || code[0] != 0x07230203u)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: not a SPIR-V module", name);
    const uint32_t bound = code[3];
    if (bound == 0 || bound > (1u << 22))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: SPIR-V id bound %u out of range", name, bound);
    id_info *ids = calloc(bound, sizeof *ids);
    if (!ids)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < bound; i++)
        ids[i].binding = ids[i].set = UINT32_MAX;
    tmm_status s = TMM_OK;
    for (size_t w = 5; w < n && s == TMM_OK;) {
        const uint32_t count = code[w] >> 16, op = code[w] & 0xffffu;
        if (count == 0 || w + count > n) {
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: malformed SPIR-V instruction at word %zu", name, w);
            break;
        }
        const uint32_t *x = code + w + 1; /* operands */
        const uint32_t m = count - 1;
        switch (op) {
        case OP_TYPE_INT:
        case OP_TYPE_FLOAT:
        case OP_TYPE_VECTOR:
        case OP_TYPE_ARRAY:
        case OP_TYPE_POINTER:
            if (m >= 2 && x[0] < bound)
                ids[x[0]] = (id_info){ op, x[1], m >= 3 ? x[2] : 0, ids[x[0]].binding, ids[x[0]].set, NULL, 0, 0, 0 };
            break;
        case OP_TYPE_STRUCT:
            if (m >= 1 && x[0] < bound) {
                ids[x[0]].op = op;
                ids[x[0]].words = x + 1;
                ids[x[0]].n_words = m - 1;
            }
            break;
        case OP_CONSTANT:
            if (m >= 3 && x[1] < bound)
                ids[x[1]].op = op, ids[x[1]].a = x[2];
            break;
        case OP_VARIABLE:
            if (m >= 3 && x[1] < bound)
                ids[x[1]].op = op, ids[x[1]].a = x[0], ids[x[1]].b = x[2];
            break;
        case OP_DECORATE:
            if (m >= 3 && x[0] < bound && x[1] == DEC_BINDING)
                ids[x[0]].binding = x[2];
            else if (m >= 3 && x[0] < bound && x[1] == DEC_DESCRIPTOR_SET)
                ids[x[0]].set = x[2];
            break;
        case OP_MEMBER_DECORATE:
            if (m >= 4 && x[0] < bound && x[2] == DEC_OFFSET && x[3] >= ids[x[0]].max_offset) {
                ids[x[0]].max_offset = x[3];
                ids[x[0]].max_member = x[1];
            }
            break;
        }
        w += count;
    }
    for (uint32_t v = 0; v < bound && s == TMM_OK; v++) {
        if (ids[v].op != OP_VARIABLE)
            continue;
        const uint32_t cls = ids[v].b, ptr = ids[v].a;
        if (cls == SC_PUSH_CONSTANT) {
            uint32_t t = ptr < bound && ids[ptr].op == OP_TYPE_POINTER ? ids[ptr].b : 0;
            out->push_size = type_size(ids, bound, t, 0);
            if (out->push_size == 0)
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: a push-constant block this reader cannot size", name);
        } else if ((cls == SC_STORAGE_BUFFER || cls == SC_UNIFORM) && ids[v].binding != UINT32_MAX) {
            /* aliased declarations (float and vec4 views) share a binding */
            if (ids[v].binding >= 32)
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: binding %u is past 31", name, ids[v].binding);
            else if (ids[v].set != 0 && ids[v].set != UINT32_MAX)
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: descriptor set %u (tmm uses set 0)", name, ids[v].set);
            else
                out->binding_mask |= 1u << ids[v].binding;
        }
    }
    for (uint32_t b = 0; b < 32; b++)
        if (out->binding_mask >> b & 1u)
            out->n_buffers = b + 1;
    free(ids);
    return s;
}
