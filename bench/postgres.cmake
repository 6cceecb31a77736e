# The PostgreSQL benchmark (included by bench/CMakeLists.txt when statepact_postgres exists).
add_executable(statepact_bench_postgres postgres_bench.cpp)
target_link_libraries(statepact_bench_postgres PRIVATE statepact::postgres)
statepact_warnings(statepact_bench_postgres)
# pgbench runs the backend's own prepared statements.
target_include_directories(statepact_bench_postgres PRIVATE ${PROJECT_SOURCE_DIR}/src/postgres)
