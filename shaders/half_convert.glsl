// fp32 <-> fp16 and bf16 conversions in integer arithmetic, so every device
// rounds the same way (round to nearest, ties to even; NaN stays a quiet NaN;
// fp16 overflows to infinity and underflows through its subnormals to zero).
// The C reference is tmm_ref_pack16 (src/ref/ref_basic.c).

uint f32_to_f16(uint f)
{
    uint sign = (f >> 16) & 0x8000u;
    uint e = (f >> 23) & 0xffu;
    uint m = f & 0x7fffffu;
    if (e == 0xffu)
        return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13) : 0u);
    int E = int(e) - 112;  // the fp16 exponent field (bias 15)
    if (E >= 31)
        return sign | 0x7c00u;
    if (E <= 0) {
        if (E < -10)
            return sign;
        // subnormal: the significand with its implicit bit, in units of 2^-24
        uint M = m | 0x800000u;
        uint shift = uint(14 - E);
        uint h = M >> shift, rem = M & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (h & 1u) != 0u))
            h++;
        return sign | h;
    }
    uint h = (uint(E) << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u))
        h++;  // a carry into the exponent rounds up to the next binade, or to infinity
    return sign | h;
}

uint f16_to_f32(uint h)
{
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return sign | 0x7f800000u | (m << 13);
    if (e == 0u)  // zero or subnormal: m * 2^-24, exact (a normal fp32)
        return sign | floatBitsToUint(float(m) * 5.9604644775390625e-8);
    return sign | ((e + 112u) << 23) | (m << 13);
}

uint f32_to_bf16(uint f)
{
    if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu) != 0u)
        return (f >> 16) | 0x40u;
    return (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
}

uint bf16_to_f32(uint b) { return b << 16; }
