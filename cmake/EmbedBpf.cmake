# morpheus_embed_bpf(<target> <symbol> <source.bpf.c> OBJECT|BITCODE)
#
# Compiles a BPF C file with clang-19 at build time and links the result into
# <target> as a read-only byte array, reachable from C++ through
# `extern const unsigned char <symbol>_start[], <symbol>_end[];`.
# OBJECT yields a loadable BPF ELF, BITCODE yields LLVM bitcode to link into
# programs being specialized.
function(morpheus_embed_bpf target symbol source mode)
  get_filename_component(src "${source}" ABSOLUTE)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${symbol}")
  if(mode STREQUAL "BITCODE")
    set(kind -emit-llvm)
    set(out "${out}.bc")
  else()
    set(kind)
    set(out "${out}.o")
  endif()
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${MORPHEUS_CLANG} -O2 -g -target bpf ${MORPHEUS_BPF_INCLUDES}
            ${kind} -MD -MF "${out}.d" -c "${src}" -o "${out}"
    DEPENDS "${src}"
    DEPFILE "${out}.d"
    COMMENT "BPF ${symbol}: ${source}"
    VERBATIM)
  set(asm "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.S")
  # Written only when its text changes (file(CONFIGURE)), so that running
  # cmake again (scripts/setup.sh does, every time) rebuilds nothing.
  string(CONCAT text
    "  .section .rodata\n"
    "  .balign 16\n"
    "  .global ${symbol}_start\n"
    "${symbol}_start:\n"
    "  .incbin \"${out}\"\n"
    "  .global ${symbol}_end\n"
    "${symbol}_end:\n"
    "  .byte 0\n"
    "  .section .note.GNU-stack,\"\",@progbits\n")
  file(CONFIGURE OUTPUT "${asm}" CONTENT "${text}" @ONLY)
  set_source_files_properties("${asm}" PROPERTIES OBJECT_DEPENDS "${out}")
  target_sources(${target} PRIVATE "${asm}")
endfunction()
