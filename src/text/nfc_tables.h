/* The Unicode data of the NFC normalizer (nfc.c), generated into
 * nfc_tables.c by nfc_tables.py. All sorted by code point (comps by pair). */
#ifndef TMM_TEXT_NFC_TABLES_H
#define TMM_TEXT_NFC_TABLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct tmm_nfc_ccc {
    uint32_t first, last;
    uint8_t ccc; /* canonical combining class of first..last */
} tmm_nfc_ccc;
typedef struct tmm_nfc_decomp {
    uint32_t cp;
    uint16_t at, n; /* its full canonical decomposition: tmm_nfc_decomp_data[at .. at + n) */
} tmm_nfc_decomp;
typedef struct tmm_nfc_comp {
    uint64_t pair; /* first << 21 | second */
    uint32_t composite;
} tmm_nfc_comp;

extern const char tmm_nfc_unicode_version[];
extern const tmm_nfc_ccc tmm_nfc_ccc_ranges[];
extern const uint32_t tmm_nfc_decomp_data[];
extern const tmm_nfc_decomp tmm_nfc_decomps[];
extern const tmm_nfc_comp tmm_nfc_comps[];
extern const size_t tmm_nfc_n_ccc, tmm_nfc_n_decomps, tmm_nfc_n_comps;

#endif
