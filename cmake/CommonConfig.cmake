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
