# One INTERFACE target that carries the language standard, warnings and Qt defines for every
# target of ours. Third-party headers come in as SYSTEM includes, so -Werror only bites our code.
add_library(outlierlens_config INTERFACE)
add_library(OutlierLens::config ALIAS outlierlens_config)

target_compile_features(outlierlens_config INTERFACE cxx_std_17)
set(CMAKE_CXX_EXTENSIONS OFF)

target_compile_definitions(outlierlens_config INTERFACE
    # Torch headers use `slots` as an identifier: Qt's keyword macros must stay off everywhere.
    QT_NO_KEYWORDS
    OUTLIERLENS_VERSION="${PROJECT_VERSION}")

target_compile_options(outlierlens_config INTERFACE
    -Wall -Wextra -Wpedantic -Wno-unused-parameter
    $<$<BOOL:${OUTLIERLENS_WERROR}>:-Werror>)

# Torch's imported target does not mark its include directories as SYSTEM; wrap it.
add_library(outlierlens_torch INTERFACE)
target_include_directories(outlierlens_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(outlierlens_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(outlierlens_torch INTERFACE ${TORCH_CXX_FLAGS})

# -DOUTLIERLENS_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer in our code (third-party
# libraries stay uninstrumented; ASan still checks every heap access they make through malloc).
# scripts/sanitize builds and runs the suite this way.
if(OUTLIERLENS_SANITIZE)
    target_compile_options(outlierlens_config INTERFACE
        -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
        # GCC 12's flow analysis gives false "may be used uninitialized" in inlined LibTorch and
        # libstdc++ code once the sanitizers instrument it.
        -Wno-maybe-uninitialized)
    target_link_options(outlierlens_config INTERFACE -fsanitize=address,undefined)
endif()

# -DOUTLIERLENS_FUZZ=ON (clang only): our code gets libFuzzer's coverage instrumentation plus ASan and
# UBSan, and the targets in tests/fuzz link libFuzzer. scripts/fuzz configures and runs this build.
if(OUTLIERLENS_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
        message(FATAL_ERROR "OUTLIERLENS_FUZZ needs clang (libFuzzer): configure with CXX=clang++ (scripts/fuzz does)")
    endif()
    target_compile_options(outlierlens_config INTERFACE
        -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    target_link_options(outlierlens_config INTERFACE -fsanitize=address,undefined)
endif()

# OpenMP: LibTorch's at::parallel_for is a header template whose `#pragma omp parallel` runs in the
# caller's translation unit; compiled without -fopenmp it runs every range on the calling thread alone,
# and so did every at::parallel_for of ours (the linear layers' blocks, AdamW, the statistics' layers,
# the CRC checks) until this flag. GCC builds link libgomp, LibTorch's own runtime. The clang fuzz build
# does without (clang's -fopenmp wants LLVM's runtime, which would be a second one beside LibTorch's):
# there the ranges run one after another, with the same results.
target_compile_options(outlierlens_config INTERFACE $<$<CXX_COMPILER_ID:GNU>:-fopenmp>)
target_link_options(outlierlens_config INTERFACE $<$<CXX_COMPILER_ID:GNU>:-fopenmp>)

# Precompiled LibTorch headers (OUTLIERLENS_PCH, on by default). Parsing <torch/torch.h> costs ~11 s of
# every translation unit that includes it, and about 70 of ours do (docs/performance.md). It is
# precompiled once, in outlierlens_torch_pch, and each target names the sources that include it with
# outlierlens_use_torch_pch(): only those get it (a source that does not, or includes only ATen's headers,
# would lose 1-5 s loading the 0.6 GB image). A torch source left off a list still builds, only slower. GCC refuses a
# precompiled header built with other code-generation flags, so every translation unit of ours is
# compiled with -fPIC, which Qt's targets need anyway. The clang fuzz build (OUTLIERLENS_FUZZ) does
# without it.
option(OUTLIERLENS_PCH "Precompile LibTorch's headers once for every target that includes them" ON)
target_compile_options(outlierlens_config INTERFACE -fPIC)
if(OUTLIERLENS_PCH AND NOT OUTLIERLENS_FUZZ)
    add_library(outlierlens_torch_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
    target_link_libraries(outlierlens_torch_pch PRIVATE outlierlens_config outlierlens_torch)
    target_precompile_headers(outlierlens_torch_pch PRIVATE <torch/torch.h>)
endif()

# outlierlens_use_torch_pch(<target> <source>...): the listed sources of <target> (paths as in its
# add_library/add_executable) include LibTorch and reuse the precompiled header; its other sources do not.
function(outlierlens_use_torch_pch target)
    if(NOT TARGET outlierlens_torch_pch)
        return()
    endif()
    target_precompile_headers(${target} REUSE_FROM outlierlens_torch_pch)
    get_target_property(sources ${target} SOURCES)
    foreach(source IN LISTS sources)
        if(source MATCHES "\\.cpp$" AND NOT source IN_LIST ARGN)
            set_source_files_properties(${source} TARGET_DIRECTORY ${target}
                PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
        endif()
    endforeach()
    # AUTOMOC's generated unit includes no torch either.
    get_target_property(binaryDir ${target} BINARY_DIR)
    set_source_files_properties(${binaryDir}/${target}_autogen/mocs_compilation.cpp TARGET_DIRECTORY ${target}
        PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    foreach(source IN LISTS ARGN)
        if(NOT source IN_LIST sources)
            message(FATAL_ERROR "outlierlens_use_torch_pch(${target}): ${source} is not one of its sources")
        endif()
    endforeach()
endfunction()
