# Finds VkFFT (header-only, Vulkan backend) and provides the interface target
# tmm_vkfft. Debian 12 ships VkFFT 1.2.26 as one header that does not compile
# as C against glslang 12; when those known lines are present we compile a
# patched copy from the build tree instead (VkFFT 1.3.x needs no patch):
#  1. "VkCommandBuffer commandBuffer = {};" is C++/C23-only syntax: use VK_NULL_HANDLE.
#  2. its positional glslang_resource_t initializer no longer matches glslang 12's
#     struct (shaders then fail with "Non-constant-index-expression"): pass
#     glslang_default_resource() from glslang-default-resource-limits instead.

find_path(VKFFT_INCLUDE_DIR vkFFT.h PATH_SUFFIXES vkFFT REQUIRED
          DOC "Directory holding vkFFT.h (libvkfft-dev on Debian)")

file(READ ${VKFFT_INCLUDE_DIR}/vkFFT.h _vkfft_text)
set(_vkfft_dir ${VKFFT_INCLUDE_DIR})
if(_vkfft_text MATCHES "VkCommandBuffer commandBuffer = {};" OR
   _vkfft_text MATCHES "&default_resource,")
  string(REPLACE "VkCommandBuffer commandBuffer = {};"
                 "VkCommandBuffer commandBuffer = VK_NULL_HANDLE;" _vkfft_text "${_vkfft_text}")
  string(REPLACE "&default_resource," "glslang_default_resource()," _vkfft_text "${_vkfft_text}")
  set(_vkfft_text "/* Patched copy made by cmake/VkFFT.cmake; see the comment there. */\n#include <glslang/Public/resource_limits_c.h>\n${_vkfft_text}")
  set(_vkfft_dir ${CMAKE_BINARY_DIR}/vkfft)
  set(_vkfft_out ${_vkfft_dir}/vkFFT.h)
  set(_vkfft_old "")
  if(EXISTS ${_vkfft_out})
    file(READ ${_vkfft_out} _vkfft_old)
  endif()
  if(NOT _vkfft_old STREQUAL _vkfft_text)
    file(WRITE ${_vkfft_out} "${_vkfft_text}")
  endif()
  message(STATUS "VkFFT: patched ${VKFFT_INCLUDE_DIR}/vkFFT.h for C into ${_vkfft_dir}")
endif()
unset(_vkfft_text)
unset(_vkfft_old)

add_library(tmm_vkfft INTERFACE)
target_include_directories(tmm_vkfft SYSTEM INTERFACE ${_vkfft_dir})
target_compile_definitions(tmm_vkfft INTERFACE VKFFT_BACKEND=0)
target_link_libraries(tmm_vkfft INTERFACE
  glslang::glslang glslang::SPIRV glslang::glslang-default-resource-limits
  SPIRV-Tools-opt SPIRV-Tools Vulkan::Vulkan)
