# cmake -DOUT=presets.c -DFILES="a.json|b.json" -P EmbedPresets.cmake
# Embeds the training presets (assets/presets/*.json) as C strings.
string(REPLACE "|" ";" files "${FILES}")
set(names "")
set(texts "")
foreach(f IN LISTS files)
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n    \"" text "${text}")
  string(APPEND names "    \"${name}\",\n")
  string(APPEND texts "    \"${text}\",\n")
endforeach()
file(WRITE ${OUT} "/* Generated from assets/presets by cmake/EmbedPresets.cmake. Do not edit. */
#include <stddef.h>

const char *const tmm_preset_names[] = {
${names}    NULL
};

const char *const tmm_preset_texts[] = {
${texts}    NULL
};
")
