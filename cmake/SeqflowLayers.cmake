# seqflow_layer(NAME [HEADERS public headers...] [DEPENDS lower layers...]
#               [LINK third-party targets...] [PUBLIC_LINK third-party targets...])
#
# Makes the static library seqflow_NAME from src/NAME/**.cc. The layer is
# compiled against a "view": a directory of symlinks to its own and its lower
# layers' source directories and public headers, nothing else. An include of a
# higher layer's header therefore fails to compile, and a link to a higher
# layer cannot be declared (a layer names only layers declared before it).
# Third-party libraries are PRIVATE (LINK) unless a public header names their
# types (PUBLIC_LINK).
set(SEQFLOW_VIEWS_DIR "${CMAKE_BINARY_DIR}/layer_views")
set_property(GLOBAL PROPERTY SEQFLOW_OWNED_HEADERS "")

function(seqflow_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 LAYER "" "" "HEADERS;DEPENDS;LINK;PUBLIC_LINK")
  set(visible_dirs ${name})
  set(visible_headers ${LAYER_HEADERS})
  foreach(dep IN LISTS LAYER_DEPENDS)
    if(NOT TARGET seqflow_${dep})
      message(FATAL_ERROR "layer ${name} depends on '${dep}', which is not a layer declared below it")
    endif()
    get_property(dep_dirs GLOBAL PROPERTY SEQFLOW_LAYER_DIRS_${dep})
    get_property(dep_headers GLOBAL PROPERTY SEQFLOW_LAYER_HEADERS_${dep})
    list(APPEND visible_dirs ${dep_dirs})
    list(APPEND visible_headers ${dep_headers})
  endforeach()
  list(REMOVE_DUPLICATES visible_dirs)
  list(REMOVE_DUPLICATES visible_headers)
  set_property(GLOBAL PROPERTY SEQFLOW_LAYER_DIRS_${name} ${visible_dirs})
  set_property(GLOBAL PROPERTY SEQFLOW_LAYER_HEADERS_${name} ${visible_headers})
  set_property(GLOBAL APPEND PROPERTY SEQFLOW_OWNED_HEADERS ${LAYER_HEADERS})

  set(view "${SEQFLOW_VIEWS_DIR}/${name}")
  file(MAKE_DIRECTORY "${view}/seqflow")
  # Links left by an earlier configure may be no longer visible; file(REMOVE)
  # deletes a link, never what it points to.
  file(GLOB stale LIST_DIRECTORIES true "${view}/*" "${view}/seqflow/*")
  foreach(entry IN LISTS stale)
    if(IS_SYMLINK "${entry}")
      file(REMOVE "${entry}")
    endif()
  endforeach()
  foreach(dir IN LISTS visible_dirs)
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${dir}" "${view}/${dir}" SYMBOLIC)
  endforeach()
  foreach(header IN LISTS visible_headers)
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/include/seqflow/${header}" "${view}/seqflow/${header}" SYMBOLIC)
  endforeach()

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/${name}/*.cc")
  add_library(seqflow_${name} STATIC ${sources})
  target_include_directories(seqflow_${name} PUBLIC "$<BUILD_INTERFACE:${view}>")
  foreach(dep IN LISTS LAYER_DEPENDS)
    target_link_libraries(seqflow_${name} PUBLIC seqflow_${dep})
  endforeach()
  target_link_libraries(seqflow_${name} PUBLIC ${LAYER_PUBLIC_LINK} PRIVATE ${LAYER_LINK})
  set_target_properties(seqflow_${name} PROPERTIES EXPORT_NAME ${name})
  set_property(GLOBAL APPEND PROPERTY SEQFLOW_LAYERS seqflow_${name})
endfunction()

# Every public header belongs to exactly one layer.
function(seqflow_check_public_headers)
  get_property(owned GLOBAL PROPERTY SEQFLOW_OWNED_HEADERS)
  file(GLOB headers RELATIVE "${PROJECT_SOURCE_DIR}/include/seqflow" CONFIGURE_DEPENDS
       "${PROJECT_SOURCE_DIR}/include/seqflow/*.h")
  foreach(header IN LISTS headers)
    if(NOT header IN_LIST owned)
      message(FATAL_ERROR "include/seqflow/${header} belongs to no layer: add it to a seqflow_layer(... HEADERS) in CMakeLists.txt")
    endif()
  endforeach()
endfunction()

# An object library (not built by default) of one source per public header
# that includes only that header, compiled with only include/ on the path
# and no library linked.
function(seqflow_public_header_check target)
  file(GLOB headers RELATIVE "${PROJECT_SOURCE_DIR}/include/seqflow" CONFIGURE_DEPENDS
       "${PROJECT_SOURCE_DIR}/include/seqflow/*.h")
  set(sources "")
  foreach(header IN LISTS headers)
    string(REPLACE ".h" "" stem "${header}")
    set(source "${CMAKE_BINARY_DIR}/public_header_check/${stem}.cc")
    file(CONFIGURE OUTPUT "${source}" CONTENT "#include \"seqflow/${header}\"\n")
    list(APPEND sources "${source}")
  endforeach()
  add_library(${target} OBJECT EXCLUDE_FROM_ALL ${sources})
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)  # each header compiled alone, in every build
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/include")
endfunction()
