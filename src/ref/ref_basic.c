/* References of the elementwise ops and the sums. */
#include "ref/ref.h"

#include <string.h>

void ref_fill(float *x, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

void ref_copy(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
}

void ref_axpy(float a, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)((double)a * x[i] + y[i]);
}

float ref_sum(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return (float)s;
}

void ref_sum_rows(const float *x, size_t rows, size_t cols, float *out)
{
    for (size_t r = 0; r < rows; r++)
        out[r] = ref_sum(x + r * cols, cols);
}

void ref_sum_cols(const float *x, size_t rows, size_t cols, float *out)
{
    for (size_t c = 0; c < cols; c++) {
        double s = 0;
        for (size_t r = 0; r < rows; r++)
            s += x[r * cols + c];
        out[c] = (float)s;
    }
}

/* IEEE half by hand: round to nearest, ties to even, NaN kept quiet. */
static uint16_t f32_to_f16(uint32_t f)
{
    const uint32_t sign = (f >> 16) & 0x8000u, e = (f >> 23) & 0xffu, m = f & 0x7fffffu;
    if (e == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (m ? 0x200u | (m >> 13) : 0u));
    const int E = (int)e - 112;
    if (E >= 31)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t h, rem, half;
    if (E <= 0) {
        if (E < -10)
            return (uint16_t)sign;
        const uint32_t M = m | 0x800000u, shift = (uint32_t)(14 - E);
        h = M >> shift, rem = M & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    } else {
        h = ((uint32_t)E << 10) | (m >> 13), rem = m & 0x1fffu, half = 0x1000u;
    }
    if (rem > half || (rem == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

uint16_t ref_f32_to_16(uint32_t f, tmm_precision format)
{
    if (format == TMM_PRECISION_FP16)
        return f32_to_f16(f);
    if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu))
        return (uint16_t)((f >> 16) | 0x40u);
    return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

uint32_t ref_16_to_f32(uint16_t h, tmm_precision format)
{
    if (format != TMM_PRECISION_FP16)
        return (uint32_t)h << 16;
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return sign | 0x7f800000u | (m << 13);
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        return sign | bits;
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}
