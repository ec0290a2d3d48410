/* GPT-2's bytes_to_unicode: the printable bytes ('!'..'~', 0xA1..0xAC,
 * 0xAE..0xFF) stand for themselves, the other 68 bytes, in order, for
 * U+0100, U+0101, ... (so a space is 'Ġ' U+0120 and a newline 'Ċ' U+010A). */
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
    out[0] = (char)(0xC0 | (cp >> 6)); /* the map's code points are below U+0800 */
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}
