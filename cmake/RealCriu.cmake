# Which real CRIU builds the suite tests against (tests/realcriu,
# tests/emulator/criu, tests/interop). One decision for all of them:
#   AMDCR_CRIU_BIN      a ready criu binary (environment CRIU_BIN at configure
#                       time replaces the cached value): the one version "bin"
#   AMDCR_CRIU_TARBALLS a directory with criu-<version>.tar.xz and SHA256SUMS
#                       (environment CRIU_TARBALLS; default ../shared/criu
#                       beside the source tree): every version it lists
# AMDCR_CRIU_VERSIONS is that list (empty: none), AMDCR_CRIU_NONE_REASON why
# it is empty. criu-dev snapshots are "dev-<commit>" (tests say "dev").
set(AMDCR_CRIU_BIN "" CACHE FILEPATH "A ready criu binary for the realcriu tests (nothing is built)")
if(DEFINED ENV{CRIU_BIN})
  set_property(CACHE AMDCR_CRIU_BIN PROPERTY VALUE "$ENV{CRIU_BIN}")
endif()
get_filename_component(_amdcr_tarballs_default "${PROJECT_SOURCE_DIR}/../shared/criu" ABSOLUTE)
set(AMDCR_CRIU_TARBALLS "${_amdcr_tarballs_default}" CACHE PATH
  "Directory with criu-<version>.tar.xz and SHA256SUMS for the realcriu tests")
if(DEFINED ENV{CRIU_TARBALLS})
  set_property(CACHE AMDCR_CRIU_TARBALLS PROPERTY VALUE "$ENV{CRIU_TARBALLS}")
endif()

set(AMDCR_CRIU_VERSIONS)
set(AMDCR_CRIU_NONE_REASON "")
if(AMDCR_SANITIZE)
  # An ASan/TSan plugin needs the sanitizer runtime loaded first; criu lacks it.
  set(AMDCR_CRIU_NONE_REASON "the plugin is built with sanitizers (AMDCR_SANITIZE=${AMDCR_SANITIZE}); a criu binary cannot load it")
elseif(AMDCR_CRIU_BIN)
  set(AMDCR_CRIU_VERSIONS bin)
elseif(EXISTS "${AMDCR_CRIU_TARBALLS}/SHA256SUMS")
  file(STRINGS "${AMDCR_CRIU_TARBALLS}/SHA256SUMS" _amdcr_sums REGEX "criu-.*\\.tar\\.xz$")
  foreach(_line IN LISTS _amdcr_sums)
    string(REGEX REPLACE "^.*criu-(.*)\\.tar\\.xz$" "\\1" _ver "${_line}")
    list(APPEND AMDCR_CRIU_VERSIONS "${_ver}")
  endforeach()
  if(NOT AMDCR_CRIU_VERSIONS)
    set(AMDCR_CRIU_NONE_REASON "${AMDCR_CRIU_TARBALLS}/SHA256SUMS lists no criu-*.tar.xz")
  endif()
else()
  set(AMDCR_CRIU_NONE_REASON "no CRIU: neither CRIU_BIN nor ${AMDCR_CRIU_TARBALLS}/SHA256SUMS (set CRIU_BIN or CRIU_TARBALLS, or -DAMDCR_CRIU_BIN / -DAMDCR_CRIU_TARBALLS, and reconfigure)")
endif()
