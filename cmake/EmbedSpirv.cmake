# cmake -DSPV=in.spv -DOUT=out.c -DNAME=name -P EmbedSpirv.cmake
# Writes the SPIR-V words as a uint32_t array (host order, so endianness is right).
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" len)
math(EXPR rem "${len} % 8")
if(len EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${SPV}: not a SPIR-V module (size is not a multiple of 4)")
endif()
# SPIR-V files from glslc are little-endian: reverse the bytes of each word.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x........u,){8})" "\\1\n  " words "${words}")
math(EXPR nbytes "${len} / 2")
file(WRITE ${OUT}
"/* Generated from ${NAME}.comp by cmake/EmbedSpirv.cmake. Do not edit. */
#include \"tmm_shaders.h\"

static const uint32_t words[] = {
  ${words}
};

const tmm_spirv tmm_spv_${NAME} = { \"${NAME}\", words, ${nbytes} };
")
