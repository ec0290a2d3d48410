/* Batched 1-D real FFTs through VkFFT (see fft.h). This is the only
 * translation unit that includes vkFFT.h: it is huge (VkFFT 1.2 is one
 * 32k-line header of static functions). It comes from a SYSTEM include
 * directory (cmake/VkFFT.cmake), which keeps its warnings out of ours.
 *
 * Layout given to VkFFT: FFTdim 1, size = { n, batch }, out of place with
 * isInputFormatted: `inputBuffer` holds the real rows (stride n floats),
 * `buffer` the complex rows (stride n/2+1 complex). The forward transform
 * reads inputBuffer and writes buffer; the inverse (inverseReturnToInputBuffer)
 * reads buffer and writes inputBuffer, so one plan serves both directions
 * without rebinding.
 *
 * glslang: VkFFT 1.2.26 calls glslang_initialize_process() at the start of
 * initializeVkFFT and glslang_finalize_process() at its end (and in
 * deleteVkFFT if initialization failed) unless isCompilerInitialized is set.
 * We set it and hold one glslang process reference per live plan instead;
 * glslang 12 counts initialize/finalize calls under its global lock, so plans
 * can be created and destroyed in any order (and from different devices on
 * different threads). */
#include "fft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vkFFT.h>

struct tmm_fft_plan {
    tmm_device *device;
    uint32_t n, batch;
    tmm_view real, complex;
    /* VkFFT keeps pointers to these: they live as long as the plan. */
    VkBuffer real_buffer, complex_buffer;
    uint64_t real_bound, complex_bound; /* sizes declared to VkFFT */
    bool glslang_ref;
    bool initialized;
    VkFFTApplication app;
};

/* Names of VkFFT's result codes; numeric so that this compiles against any
 * VkFFT version (the values are stable across 1.2 and 1.3). */
static const struct {
    int code;
    const char *name;
} vkfft_results[] = {
    { 1, "VKFFT_ERROR_MALLOC_FAILED" },
    { 2, "VKFFT_ERROR_INSUFFICIENT_CODE_BUFFER" },
    { 3, "VKFFT_ERROR_INSUFFICIENT_TEMP_BUFFER" },
    { 4, "VKFFT_ERROR_PLAN_NOT_INITIALIZED" },
    { 5, "VKFFT_ERROR_NULL_TEMP_PASSED" },
    { 1001, "VKFFT_ERROR_INVALID_PHYSICAL_DEVICE" },
    { 1002, "VKFFT_ERROR_INVALID_DEVICE" },
    { 1003, "VKFFT_ERROR_INVALID_QUEUE" },
    { 1004, "VKFFT_ERROR_INVALID_COMMAND_POOL" },
    { 1005, "VKFFT_ERROR_INVALID_FENCE" },
    { 1006, "VKFFT_ERROR_ONLY_FORWARD_FFT_INITIALIZED" },
    { 1007, "VKFFT_ERROR_ONLY_INVERSE_FFT_INITIALIZED" },
    { 2001, "VKFFT_ERROR_EMPTY_FFTdim" },
    { 2002, "VKFFT_ERROR_EMPTY_size" },
    { 2003, "VKFFT_ERROR_EMPTY_bufferSize" },
    { 2004, "VKFFT_ERROR_EMPTY_buffer" },
    { 2005, "VKFFT_ERROR_EMPTY_tempBufferSize" },
    { 2006, "VKFFT_ERROR_EMPTY_tempBuffer" },
    { 2007, "VKFFT_ERROR_EMPTY_inputBufferSize" },
    { 2008, "VKFFT_ERROR_EMPTY_inputBuffer" },
    { 2009, "VKFFT_ERROR_EMPTY_outputBufferSize" },
    { 2010, "VKFFT_ERROR_EMPTY_outputBuffer" },
    { 3001, "VKFFT_ERROR_UNSUPPORTED_RADIX" },
    { 3002, "VKFFT_ERROR_UNSUPPORTED_FFT_LENGTH" },
    { 3003, "VKFFT_ERROR_UNSUPPORTED_FFT_LENGTH_R2C" },
    { 4001, "VKFFT_ERROR_FAILED_TO_ALLOCATE" },
    { 4002, "VKFFT_ERROR_FAILED_TO_MAP_MEMORY" },
    { 4003, "VKFFT_ERROR_FAILED_TO_ALLOCATE_COMMAND_BUFFERS" },
    { 4004, "VKFFT_ERROR_FAILED_TO_BEGIN_COMMAND_BUFFER" },
    { 4005, "VKFFT_ERROR_FAILED_TO_END_COMMAND_BUFFER" },
    { 4006, "VKFFT_ERROR_FAILED_TO_SUBMIT_QUEUE" },
    { 4007, "VKFFT_ERROR_FAILED_TO_WAIT_FOR_FENCES" },
    { 4008, "VKFFT_ERROR_FAILED_TO_RESET_FENCES" },
    { 4009, "VKFFT_ERROR_FAILED_TO_CREATE_DESCRIPTOR_POOL" },
    { 4010, "VKFFT_ERROR_FAILED_TO_CREATE_DESCRIPTOR_SET_LAYOUT" },
    { 4011, "VKFFT_ERROR_FAILED_TO_ALLOCATE_DESCRIPTOR_SETS" },
    { 4012, "VKFFT_ERROR_FAILED_TO_CREATE_PIPELINE_LAYOUT" },
    { 4013, "VKFFT_ERROR_FAILED_SHADER_PREPROCESS" },
    { 4014, "VKFFT_ERROR_FAILED_SHADER_PARSE" },
    { 4015, "VKFFT_ERROR_FAILED_SHADER_LINK" },
    { 4016, "VKFFT_ERROR_FAILED_SPIRV_GENERATE" },
    { 4017, "VKFFT_ERROR_FAILED_TO_CREATE_SHADER_MODULE" },
    { 4024, "VKFFT_ERROR_FAILED_TO_CREATE_BUFFER" },
    { 4025, "VKFFT_ERROR_FAILED_TO_ALLOCATE_MEMORY" },
    { 4026, "VKFFT_ERROR_FAILED_TO_BIND_BUFFER_MEMORY" },
    { 4027, "VKFFT_ERROR_FAILED_TO_FIND_MEMORY" },
    { 4028, "VKFFT_ERROR_FAILED_TO_SYNCHRONIZE" },
    { 4029, "VKFFT_ERROR_FAILED_TO_COPY" },
    { 4042, "VKFFT_ERROR_FAILED_TO_INITIALIZE" },
    { 4046, "VKFFT_ERROR_FAILED_TO_CREATE_PIPELINE" },
};

static tmm_status fft_fail(VkFFTResult result, const char *what, uint32_t n, uint32_t batch)
{
    const char *name = "unknown VkFFT error";
    for (size_t i = 0; i < sizeof vkfft_results / sizeof vkfft_results[0]; i++)
        if (vkfft_results[i].code == (int)result)
            name = vkfft_results[i].name;
    const char *hint = "";
    if ((int)result == 3003)
        hint = "; VkFFT 1.2 cannot do odd lengths that need more than one pass (above about "
               "maxComputeSharedMemorySize / 8): use an even n (tmm_fft_good_length)";
    return tmm_fail(TMM_ERR_FFT, "%s (n=%u, batch=%u) failed: %s (VkFFT error %d)%s", what, n, batch, name,
                    (int)result, hint);
}

static uint64_t round_up8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

static uint32_t largest_prime_factor(uint32_t n)
{
    uint32_t largest = 1;
    for (uint32_t f = 2; (uint64_t)f * f <= n; f++)
        while (n % f == 0) {
            largest = f;
            n /= f;
        }
    return n > 1 ? n : largest;
}

uint32_t tmm_fft_good_length(uint32_t min_n)
{
    for (uint32_t n = min_n < 2 ? 2 : min_n + (min_n & 1u); n >= 2; n += 2) {
        uint32_t m = n;
        while (m % 2 == 0)
            m /= 2;
        while (m % 3 == 0)
            m /= 3;
        while (m % 5 == 0)
            m /= 5;
        while (m % 7 == 0)
            m /= 7;
        if (m == 1)
            return n;
    }
    return 0;
}

/* One view at plan creation: the whole-buffer rules of fft.h. */
static tmm_status check_view(tmm_view v, uint64_t want, uint64_t buffer_min, const char *what, uint32_t n,
                             uint32_t batch)
{
    if (!v.buffer)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT plan (n=%u, batch=%u): no %s buffer", n, batch, what);
    if (v.offset != 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT plan (n=%u, batch=%u): the %s view starts at byte %llu; "
                        "with VkFFT 1.2 both views must start at byte 0 of their buffers", n, batch, what,
                        (unsigned long long)v.offset);
    if (v.size != want)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT plan (n=%u, batch=%u): the %s view holds %llu bytes, "
                        "the plan needs exactly %llu", n, batch, what, (unsigned long long)v.size,
                        (unsigned long long)want);
    if (v.buffer->size < buffer_min)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT plan (n=%u, batch=%u): the %s buffer holds %llu bytes; "
                        "VkFFT binds %llu bytes of it (tmm_fft_complex_bytes), so it must be at least that large",
                        n, batch, what, (unsigned long long)v.buffer->size, (unsigned long long)buffer_min);
    return TMM_OK;
}

tmm_status tmm_fft_plan_create(tmm_device *device, uint32_t n, uint32_t batch, tmm_view real, tmm_view complex,
                               tmm_fft_plan **out)
{
    *out = NULL;
    TMM_TRY(tmm_device_usable(device));
    if (n < 2 || batch < 1)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT plan: length %u and batch %u (need n >= 2, batch >= 1)", n,
                        batch);
    uint64_t real_bytes = tmm_fft_real_bytes(n, batch), complex_bytes = tmm_fft_complex_bytes(n, batch);
    TMM_TRY(check_view(real, real_bytes, complex_bytes, "real", n, batch));
    TMM_TRY(check_view(complex, complex_bytes, complex_bytes, "complex", n, batch));
    if (real.buffer == complex.buffer)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT plan (n=%u, batch=%u): the real and complex views must be "
                        "in different buffers", n, batch);
    if (complex_bytes > device->info.max_storage_buffer_range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "FFT plan (n=%u, batch=%u): VkFFT would bind %llu bytes per buffer, "
                        "above the device's maxStorageBufferRange (%llu bytes); use fewer rows per plan", n, batch,
                        (unsigned long long)complex_bytes, (unsigned long long)device->info.max_storage_buffer_range);
    uint32_t prime = largest_prime_factor(n);
    if (prime > 13 && VkFFTGetVersion() < 10300)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "FFT plan (n=%u, batch=%u): n has the prime factor %u; VkFFT %d.%d.%d "
                        "computes real FFTs only for lengths whose prime factors are at most 13 (its Bluestein "
                        "path gives wrong results); use tmm_fft_good_length (%u)", n, batch, prime,
                        VkFFTGetVersion() / 10000, VkFFTGetVersion() / 100 % 100, VkFFTGetVersion() % 100,
                        tmm_fft_good_length(n));

    tmm_fft_plan *p = calloc(1, sizeof *p);
    if (!p)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    p->device = device;
    p->n = n;
    p->batch = batch;
    p->real = real;
    p->complex = complex;
    p->real_buffer = real.buffer->buffer;
    p->complex_buffer = complex.buffer->buffer;
    p->real_bound = round_up8(real_bytes); /* <= complex_bytes */
    p->complex_bound = complex_bytes;

    if (!glslang_initialize_process()) {
        free(p);
        return tmm_fail(TMM_ERR_FFT, "FFT plan (n=%u, batch=%u): glslang_initialize_process failed", n, batch);
    }
    p->glslang_ref = true;

    VkFFTConfiguration c;
    memset(&c, 0, sizeof c);
    c.FFTdim = 1;
    c.size[0] = n;
    c.size[1] = batch;
    c.size[2] = 1;
    c.physicalDevice = &device->physical;
    c.device = &device->device;
    c.queue = &device->queue;
    c.commandPool = &device->command_pool;
    c.fence = &device->transfer_fence;
    c.isCompilerInitialized = 1;

    c.performR2C = 1;
    c.normalize = 1;
    /* Twiddles from tables computed in double on the host. VkFFT 1.2 turns
     * these on by itself only on Intel; elsewhere (NVIDIA, AMD, lavapipe) its
     * shaders compute twiddles with float sincos. Tables give the same
     * numerics on every device, 2-3x smaller errors on lavapipe, and make
     * the plan-time upload (a submit on the device queue, waited on with the
     * transfer fence) a path the tests run. */
    c.useLUT = 1;
    c.isInputFormatted = 1;
    c.inverseReturnToInputBuffer = 1;
    c.inputBufferNum = 1;
    c.inputBuffer = &p->real_buffer;
    c.inputBufferSize = &p->real_bound;
    c.inputBufferStride[0] = n;
    c.inputBufferStride[1] = (uint64_t)n * batch;
    c.inputBufferStride[2] = (uint64_t)n * batch;
    c.bufferNum = 1;
    c.buffer = &p->complex_buffer;
    c.bufferSize = &p->complex_bound;
    c.bufferStride[0] = tmm_fft_complex_count(n);
    c.bufferStride[1] = (uint64_t)tmm_fft_complex_count(n) * batch;
    c.bufferStride[2] = (uint64_t)tmm_fft_complex_count(n) * batch;

    VkFFTResult r = initializeVkFFT(&p->app, c);
    if (r != VKFFT_SUCCESS) {
        /* initializeVkFFT cleans up on most failures but not all; deleteVkFFT
         * may be called again (it clears what it frees). */
        deleteVkFFT(&p->app);
        glslang_finalize_process();
        free(p);
        return fft_fail(r, "creating the VkFFT plan", n, batch);
    }
    p->initialized = true;
    *out = p;
    return TMM_OK;
}

void tmm_fft_plan_destroy(tmm_fft_plan *p)
{
    if (!p)
        return;
    if (p->initialized)
        deleteVkFFT(&p->app);
    if (p->glslang_ref)
        glslang_finalize_process();
    free(p);
}

uint32_t tmm_fft_plan_n(const tmm_fft_plan *p) { return p->n; }
uint32_t tmm_fft_plan_batch(const tmm_fft_plan *p) { return p->batch; }

static bool same_view(tmm_view a, tmm_view b)
{
    return a.buffer == b.buffer && a.offset == b.offset && a.size == b.size;
}

static tmm_status check_views(const tmm_fft_plan *p, tmm_view real, tmm_view complex, const char *what)
{
    if (same_view(real, p->real) && same_view(complex, p->complex))
        return TMM_OK;
    bool real_ok = same_view(real, p->real);
    tmm_view got = real_ok ? complex : real, want = real_ok ? p->complex : p->real;
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s (n=%u, batch=%u): the %s view (buffer %p, offset %llu, size %llu) "
                    "is not the one the plan was created with (buffer %p, offset %llu, size %llu); VkFFT plans are "
                    "bound to their buffers: create a plan per buffer pair", what, p->n, p->batch,
                    real_ok ? "complex" : "real", (void *)got.buffer, (unsigned long long)got.offset,
                    (unsigned long long)got.size, (void *)want.buffer, (unsigned long long)want.offset,
                    (unsigned long long)want.size);
}

static tmm_status record(tmm_recorder *r, tmm_fft_plan *p, int inverse, const char *what)
{
    if (tmm_recorder_device(r) != p->device)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the plan belongs to another device", what);
    VkCommandBuffer cmd;
    TMM_TRY(tmm_record_external(r, &cmd));
    VkFFTLaunchParams lp;
    memset(&lp, 0, sizeof lp);
    lp.commandBuffer = &cmd;
    /* No buffers and zero offsets, as at creation: VkFFT then leaves its
     * descriptor sets alone (any change would make it rewrite them). */
    VkFFTResult res = VkFFTAppend(&p->app, inverse, &lp);
    if (res != VKFFT_SUCCESS)
        return fft_fail(res, what, p->n, p->batch);
    return TMM_OK;
}

tmm_status tmm_record_fft_r2c(tmm_recorder *r, tmm_fft_plan *p, tmm_view real_in, tmm_view complex_out)
{
    TMM_TRY(check_views(p, real_in, complex_out, "tmm_record_fft_r2c"));
    return record(r, p, -1, "recording an R2C FFT");
}

tmm_status tmm_record_fft_c2r(tmm_recorder *r, tmm_fft_plan *p, tmm_view complex_in, tmm_view real_out)
{
    TMM_TRY(check_views(p, real_out, complex_in, "tmm_record_fft_c2r"));
    return record(r, p, 1, "recording a C2R FFT");
}
