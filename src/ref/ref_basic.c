/* References of the elementwise ops and the sums. */
#include "ref/ref.h"

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
