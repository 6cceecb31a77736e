# The Redis backend's Lua scripts live in src/redis/lua/<name>.lua, so they can be read, linted and
# diffed as code, and are compiled in as strings: statepact_redis_scripts(OUT_DIR) writes
# OUT_DIR/scripts.hpp with one `scripts::<name>` per script and `scripts::all` listing them. A
# script whose first line is "--! uses: now high_water" gets those pieces of src/redis/lua/lib/ put
# before it.
set(STATEPACT_REDIS_SCRIPTS
  acquire renew release fence register_resource set_policy get_policy read snapshot exists lock
  wait unlock commit lease_info resource_info revoke upgrade_layout)

function(statepact_redis_scripts out_dir)
  set(lua_dir ${PROJECT_SOURCE_DIR}/src/redis/lua)
  set(definitions "")
  set(entries "")
  foreach(name IN LISTS STATEPACT_REDIS_SCRIPTS)
    set(path ${lua_dir}/${name}.lua)
    file(READ ${path} body)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
    set(text "")
    if(body MATCHES "^--! uses:([a-z_ ]*)\n")
      string(STRIP "${CMAKE_MATCH_1}" uses)
      string(REPLACE " " ";" uses "${uses}")
      foreach(piece IN LISTS uses)
        file(READ ${lua_dir}/lib/${piece}.lua piece_text)
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${lua_dir}/lib/${piece}.lua)
        string(APPEND text "${piece_text}")
      endforeach()
    endif()
    string(APPEND text "${body}")
    # Each script as the server gets it, for luacheck (see tests/CMakeLists.txt).
    file(WRITE ${out_dir}/lua/${name}.lua "${text}")
    string(APPEND definitions
      "inline constexpr const char* ${name} = R\"statepact_lua(${text})statepact_lua\";\n\n")
    string(APPEND entries "    {\"${name}\", ${name}},\n")
  endforeach()
  set(STATEPACT_REDIS_SCRIPT_DEFINITIONS "${definitions}")
  set(STATEPACT_REDIS_SCRIPT_ENTRIES "${entries}")
  configure_file(${PROJECT_SOURCE_DIR}/src/redis/scripts.hpp.in ${out_dir}/scripts.hpp @ONLY)
endfunction()
