# Build provenance: the git commit the sources are at and whether they differ from it, written
# into a generated C++ file compiled into seqlab::experiment (read by build_info(),
# lib/src/experiment/metadata.cpp). It runs at BUILD time, on every build, so a binary records
# the sources it was built from, however far the tree's HEAD moves while it runs.
#
# Used two ways:
# - include()d by CMakeLists.txt: seqlab_add_provenance(<target> <source dir>) adds an always-run
#   target that regenerates <build dir>/generated/provenance.cpp (from lib/provenance.cpp.in) and
#   compiles it into <target> (tests/integration/provenance/ checks the wiring on a probe);
# - as the script that target runs:
#     cmake -DSOURCE_DIR=<source tree> -DBINARY_DIR=<build tree> -DOUTPUT=<file.cpp>
#           -DTEMPLATE=lib/provenance.cpp.in [-DGIT_EXECUTABLE=<git>] -P lib/provenance.cmake
#
# What it records:
# - commit: `git rev-parse --verify HEAD` of SOURCE_DIR; "unknown" when git is absent, when
#   SOURCE_DIR is not a checkout, or when it is an unpacked tarball lying inside some other,
#   unrelated checkout (its CMakeLists.txt is not tracked there).
# - dirty: 1 if `git status --porcelain` lists any change under SOURCE_DIR (tracked files
#   modified, staged or deleted, and untracked files that are not ignored: a new .cpp joins the
#   build through its folder's glob), results/ excluded (committing results changes no code), and
#   so is BINARY_DIR when it lies inside SOURCE_DIR; 0 if none; -1 when the commit is unknown.
#   Read-only (--no-optional-locks: the index is never written).
# - Worktrees and submodules (where .git is a file) work alike: only `git -C` is used, never a
#   path under .git/, so no git file is a dependency: the target runs on every build instead
#   (`git status` takes ~15 ms on this tree).
# OUTPUT is rewritten only when its content changes (configure_file leaves an identical file
# untouched, and the Ninja rule has restat), so a build with no change recompiles and relinks
# nothing; a new commit, or the first edit after a clean checkout, recompiles one small file and
# relinks what links <target>.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  function(seqlab_add_provenance target source_dir)
    find_package(Git QUIET)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/provenance.cpp)
    add_custom_target(${target}_provenance
      COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${source_dir} -DBINARY_DIR=${CMAKE_BINARY_DIR}
              -DOUTPUT=${out} -DTEMPLATE=${CMAKE_CURRENT_FUNCTION_LIST_DIR}/provenance.cpp.in
              -DGIT_EXECUTABLE=${GIT_EXECUTABLE} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
      BYPRODUCTS ${out}
      VERBATIM)
    target_sources(${target} PRIVATE ${out})
    set_source_files_properties(${out} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    add_dependencies(${target} ${target}_provenance)
  endfunction()
  return()
endif()

foreach(var SOURCE_DIR BINARY_DIR OUTPUT TEMPLATE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "provenance.cmake: -D${var}=... is required")
  endif()
endforeach()

set(SEQLAB_GIT_COMMIT "unknown")
set(SEQLAB_GIT_DIRTY -1)
if(GIT_EXECUTABLE)
  execute_process(
    COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" ls-files --error-unmatch -- CMakeLists.txt
    RESULT_VARIABLE tracked OUTPUT_QUIET ERROR_QUIET)
  if(tracked EQUAL 0)
    execute_process(
      COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --verify -q HEAD
      RESULT_VARIABLE head_rc OUTPUT_VARIABLE head ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(head_rc EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
      set(pathspec . ":(exclude)results")
      file(RELATIVE_PATH build_rel "${SOURCE_DIR}" "${BINARY_DIR}")
      if(NOT build_rel STREQUAL "" AND NOT build_rel MATCHES "^\\.\\./" AND NOT IS_ABSOLUTE "${build_rel}")
        list(APPEND pathspec ":(exclude)${build_rel}")
      endif()
      execute_process(
        COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" --no-optional-locks status --porcelain
                -- ${pathspec}
        RESULT_VARIABLE status_rc OUTPUT_VARIABLE status ERROR_QUIET)
      set(SEQLAB_GIT_COMMIT "${head}")
      if(status_rc EQUAL 0)
        if(status STREQUAL "")
          set(SEQLAB_GIT_DIRTY 0)
        else()
          set(SEQLAB_GIT_DIRTY 1)
        endif()
      endif()
    endif()
  endif()
endif()

configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
