/* GPT-2's bytes_to_unicode: the printable bytes ('!'..'~', 0xA1..0xAC,
 * 0xAE..0xFF) stand for themselves, the other 68 bytes, in order, for
 * U+0100, U+0101, ... (so a space is 'Ġ' U+0120 and a newline 'Ċ' U+010A).
 * And the UTF-8 and White_Space helpers the pipeline shares. */
#include "text/tokenizer_impl.h"

static bool printable(unsigned b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

void tmm_tok_byte_map(tmm_tok_map *m)
{
    uint32_t n = 256;
    for (unsigned i = 0; i < TMM_TOK_MAP_CHARS; i++)
        m->char_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        m->byte_char[b] = printable(b) ? b : n++;
        m->char_byte[m->byte_char[b]] = (int16_t)b;
    }
}

size_t tmm_tok_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t tmm_tok_utf8_get(const char *p, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)p;
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = UINT32_MAX;
        return 1;
    }
    uint32_t v = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = UINT32_MAX;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3F);
    }
    /* overlong, surrogate or past U+10FFFF */
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = UINT32_MAX;
        return 1;
    }
    *cp = v;
    return len;
}

bool tmm_tok_is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
