# Which real CRIU builds the suite tests against (tests/realcriu,
# tests/emulator/criu, tests/interop and the suites that use their list).
# scripts/build-criu.sh decides (its --plan, asked here at configure time):
# the first of
#   AMDCR_CRIU_BIN      a ready criu binary (environment CRIU_BIN at configure
#                       time replaces the cached value): the one version "bin"
#   AMDCR_CRIU_TARBALLS a directory with criu-<version>.tar.xz and SHA256SUMS
#                       (environment CRIU_TARBALLS; default ../shared/criu
#                       beside the source tree): every version it lists
#   an installed criu >= 4.0 on PATH: "installed-<its version>"
#   the download of the release pinned below (AMDCR_CRIU_DOWNLOAD; the
#                       environment CRIU_DOWNLOAD replaces it): its version
# AMDCR_CRIU_VERSIONS is that list (empty: none), AMDCR_CRIU_NONE_REASON why
# it is empty, AMDCR_CRIU_SOURCE which of the four (bin, tarballs,
# installed, download; empty: none), AMDCR_CRIU_TARBALL_VERSIONS the
# tarballs' versions whatever the source. criu-dev snapshots are
# "dev-<commit>" (tests say "dev").

# The pinned release, written only here (scripts/build-criu.sh reads these
# three lines). CRIU's release sources are GitHub's archive of the tag, which
# is `git archive` output compressed with gzip; the pin is the SHA-256 of the
# decompressed tar stream, which the script checks after decompressing.
# Checked here, offline: xz -dc of the criu-4.2.1.tar.xz in ../shared/criu
# (Debian's orig tarball of CRIU 4.2.1) hashes to this value, and it is
# byte for byte `git archive --format=tar --prefix=criu-4.2.1/` of a commit
# of its tree and time (tar streams identical but for the commit id in the
# pax header, which names upstream's commit 9539417f3e3c). Not checked here
# (no network): that the tag v4.2.1 names that commit; if GitHub's archive
# differs, the download is refused with a SHA-256 mismatch, never used.
set(AMDCR_CRIU_RELEASE "4.2.1")
set(AMDCR_CRIU_RELEASE_URL "https://github.com/checkpoint-restore/criu/archive/refs/tags/v4.2.1.tar.gz")
set(AMDCR_CRIU_RELEASE_TAR_SHA256 "335bf0a7b7333061e523b50d810ef0a63d314721a41a364a3d2a5450f2e78b45")

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
option(AMDCR_CRIU_DOWNLOAD "Download the pinned CRIU release for the realcriu tests when no other CRIU is there" ON)
if(DEFINED ENV{CRIU_DOWNLOAD})
  set_property(CACHE AMDCR_CRIU_DOWNLOAD PROPERTY VALUE "$ENV{CRIU_DOWNLOAD}")
endif()
if(AMDCR_CRIU_DOWNLOAD)
  set(_amdcr_criu_download 1)
else()
  set(_amdcr_criu_download 0)
endif()
# The environment scripts/build-criu.sh runs in (the plan here, the fixture
# realcriu_build_criu later), so that both see the same sources.
set(AMDCR_CRIU_ENV "CRIU_BIN=${AMDCR_CRIU_BIN}" "CRIU_TARBALLS=${AMDCR_CRIU_TARBALLS}"
  "CRIU_DOWNLOAD=${_amdcr_criu_download}")

set(AMDCR_CRIU_VERSIONS)
set(AMDCR_CRIU_TARBALL_VERSIONS)
set(AMDCR_CRIU_SOURCE "")
set(AMDCR_CRIU_NONE_REASON "")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env ${AMDCR_CRIU_ENV} bash ${PROJECT_SOURCE_DIR}/scripts/build-criu.sh --plan
  OUTPUT_VARIABLE _amdcr_plan RESULT_VARIABLE _amdcr_plan_rc ERROR_VARIABLE _amdcr_plan_err)
if(NOT _amdcr_plan_rc EQUAL 0)
  message(FATAL_ERROR "scripts/build-criu.sh --plan failed: ${_amdcr_plan_err}")
endif()
# A line is a list element: its own semicolons become commas.
string(REPLACE ";" "," _amdcr_plan_lines "${_amdcr_plan}")
string(REGEX REPLACE "\n" ";" _amdcr_plan_lines "${_amdcr_plan_lines}")
foreach(_line IN LISTS _amdcr_plan_lines)
  if(_line MATCHES "^tarball (.+)$")
    list(APPEND AMDCR_CRIU_TARBALL_VERSIONS "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^version (.+)$")
    list(APPEND AMDCR_CRIU_VERSIONS "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^source (.+)$")
    set(AMDCR_CRIU_SOURCE "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "^none (.+)$")
    set(AMDCR_CRIU_NONE_REASON "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(AMDCR_SANITIZE)
  # An ASan/TSan plugin needs the sanitizer runtime loaded first; criu lacks it.
  set(AMDCR_CRIU_VERSIONS)
  set(AMDCR_CRIU_NONE_REASON "the plugin is built with sanitizers (AMDCR_SANITIZE=${AMDCR_SANITIZE}); a criu binary cannot load it")
elseif(AMDCR_CRIU_SOURCE STREQUAL "tarballs" AND NOT AMDCR_CRIU_VERSIONS)
  set(AMDCR_CRIU_NONE_REASON "${AMDCR_CRIU_TARBALLS}/SHA256SUMS lists no criu-*.tar.xz")
endif()
if(AMDCR_CRIU_VERSIONS)
  message(STATUS "realcriu: CRIU from ${AMDCR_CRIU_SOURCE}: ${AMDCR_CRIU_VERSIONS}")
else()
  message(STATUS "realcriu: NOT RUN: ${AMDCR_CRIU_NONE_REASON}")
endif()
