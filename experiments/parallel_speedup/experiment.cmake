# parallel_speedup times its layer stacks through Google Benchmark (timing.cpp). The top
# CMakeLists finds the package only when SEQLAB_BUILD_BENCH is ON; this experiment needs it always.
find_package(benchmark REQUIRED)
target_link_libraries(${name} PRIVATE benchmark::benchmark)
