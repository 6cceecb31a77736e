# statepact_bench_redis: lease and commit throughput next to redis-benchmark (see redis_bench.cpp).
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS_BENCH REQUIRED IMPORTED_TARGET hiredis)
add_executable(statepact_bench_redis redis_bench.cpp)
target_link_libraries(statepact_bench_redis PRIVATE statepact::redis PkgConfig::HIREDIS_BENCH)
# The benchmark runs the backend's own scripts through redis-benchmark.
target_include_directories(statepact_bench_redis PRIVATE ${PROJECT_SOURCE_DIR}/src/redis
  ${PROJECT_BINARY_DIR}/src/redis/generated)
statepact_warnings(statepact_bench_redis)

# statepact_bench_redis_cluster: the same operations on one server and on a Redis Cluster
# (see redis_cluster_bench.cpp).
add_executable(statepact_bench_redis_cluster redis_cluster_bench.cpp)
target_link_libraries(statepact_bench_redis_cluster PRIVATE statepact::redis)
statepact_warnings(statepact_bench_redis_cluster)
