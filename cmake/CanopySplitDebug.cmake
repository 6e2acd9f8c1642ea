# Run by `cmake --install` (CanopyInstall.cmake, CANOPY_INSTALL_DEBUG_INFO=split):
# takes the debug information out of the installed programs and libraries. Given
# canopy_split_objcopy, canopy_split_dirs (bin and lib) and canopy_split_archive_dir.
function(canopy_split_run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status ERROR_VARIABLE error)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "splitting debug information: ${ARGN}: ${error}")
  endif()
endfunction()

foreach(dir IN LISTS canopy_split_dirs)
  file(GLOB files LIST_DIRECTORIES false "${dir}/*")
  foreach(file IN LISTS files)
    if(IS_SYMLINK "${file}")
      continue()
    endif()
    get_filename_component(name "${file}" NAME)
    if(name MATCHES "\\.a$")
      # A static library: as built under debug/, without its debug sections here.
      file(MAKE_DIRECTORY "${canopy_split_archive_dir}")
      file(COPY_FILE "${file}" "${canopy_split_archive_dir}/${name}")
      canopy_split_run("${canopy_split_objcopy}" --strip-debug "${file}")
      continue()
    endif()
    file(READ "${file}" magic LIMIT 4 HEX)
    if(NOT magic STREQUAL "7f454c46")  # not ELF: a script, a .pc file...
      continue()
    endif()
    # A program or shared library: its debug information to .debug/NAME.debug, which
    # its debuglink names (gdb looks in .debug/ beside the file).
    set(debug_file "${dir}/.debug/${name}.debug")
    file(MAKE_DIRECTORY "${dir}/.debug")
    file(REMOVE "${debug_file}")
    canopy_split_run("${canopy_split_objcopy}" --only-keep-debug "${file}" "${debug_file}")
    canopy_split_run("${canopy_split_objcopy}" --strip-debug --remove-section=.gnu_debuglink
                     "--add-gnu-debuglink=${debug_file}" "${file}")
  endforeach()
endforeach()
