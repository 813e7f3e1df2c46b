# protobuf_c_generate(<out-var> <proto files...>): generate .pb-c.c/.pb-c.h in
# the build tree at build time with protoc-c.
find_program(PROTOC_C NAMES protoc-c protoc-gen-c REQUIRED)
function(protobuf_c_generate out_var)
  set(srcs)
  foreach(proto ${ARGN})
    get_filename_component(abs ${proto} ABSOLUTE)
    get_filename_component(dir ${abs} DIRECTORY)
    get_filename_component(stem ${abs} NAME_WE)
    set(c ${CMAKE_CURRENT_BINARY_DIR}/${stem}.pb-c.c)
    set(h ${CMAKE_CURRENT_BINARY_DIR}/${stem}.pb-c.h)
    add_custom_command(OUTPUT ${c} ${h}
      COMMAND ${PROTOC_C} --proto_path=${dir} --c_out=${CMAKE_CURRENT_BINARY_DIR} ${abs}
      DEPENDS ${abs}
      COMMENT "protoc-c ${stem}.proto")
    list(APPEND srcs ${c})
  endforeach()
  set(${out_var} ${srcs} PARENT_SCOPE)
endfunction()
