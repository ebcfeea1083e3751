# The layers of docs/design.md, enforced by the compiler. There is no include
# directory common to every target: each library publishes an include root
# that holds its own directory alone (a symbolic link under
# build/include-roots/), so `#include "core/Tables.h"` resolves only in
# targets that link morpheus_core, directly or through a PUBLIC link. A
# layer that includes one it does not link fails to compile, naming the
# header; a library that links another PRIVATE hides it from its users (the
# client library's users never see the backend). What include roots cannot
# express (the core's few support headers, libbpf's system headers, relative
# paths) tests/layers/check_layers.py checks.

# morpheus_include_root(<target> <PUBLIC|PRIVATE|INTERFACE> <prefix> <dir>)
#   Makes `#include "<prefix>/X.h"` find <dir>/X.h for <target> (and, unless
#   PRIVATE, for what links it), and nothing else of the repository.
function(morpheus_include_root target scope prefix dir)
  string(REPLACE "/" "_" root_name "${prefix}")
  set(root ${CMAKE_BINARY_DIR}/include-roots/${root_name})
  if(NOT IS_SYMLINK ${root}/${prefix})
    get_filename_component(parent ${root}/${prefix} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${dir} ${root}/${prefix} SYMBOLIC)
  endif()
  target_include_directories(${target} ${scope} ${root})
endfunction()

# morpheus_header_root(<target> <PUBLIC|PRIVATE|INTERFACE> <prefix> <dir>)
#   Like morpheus_include_root, but the root holds <dir>'s own headers alone
#   (a link per *.h and *.def), none of its subdirectories: `#include "<prefix>/X.h"`
#   finds <dir>/X.h, `#include "<prefix>/sub/Y.h"` nothing. The core
#   publishes its API this way, keeping passes/ to itself. The links are made
#   anew at each configuration, which a header added or removed triggers.
function(morpheus_header_root target scope prefix dir)
  string(REPLACE "/" "_" root_name "${prefix}")
  set(root ${CMAKE_BINARY_DIR}/include-roots/${root_name}-headers)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/${prefix})
  file(GLOB headers CONFIGURE_DEPENDS RELATIVE ${dir} ${dir}/*.h ${dir}/*.def)
  foreach(header IN LISTS headers)
    file(CREATE_LINK ${dir}/${header} ${root}/${prefix}/${header} SYMBOLIC)
  endforeach()
  target_include_directories(${target} ${scope} ${root})
endfunction()
