# outlierlens_add_test(<name> [TORCH] SOURCES <files...> LIBS <targets...> LABELS <labels...> [TIMEOUT s])
# TORCH: the sources include LibTorch and reuse its precompiled header (cmake/CommonConfig.cmake).
# One Qt Test executable per tst_*.cpp, registered with CTest. Tests run from the source tree's
# tests/ folder so fixtures resolve through OUTLIERLENS_TEST_DATA (tests never read outside the repo).
function(outlierlens_add_test name)
    cmake_parse_arguments(T "TORCH" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE outlierlens_config Qt6::Test ${T_LIBS})
    target_compile_definitions(${name} PRIVATE
        OUTLIERLENS_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/fixtures"
        OUTLIERLENS_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
        OUTLIERLENS_BINARY_DIR="${PROJECT_BINARY_DIR}")
    set_target_properties(${name} PROPERTIES AUTOMOC ON)
    if(T_TORCH)
        outlierlens_use_torch_pch(${name} ${T_SOURCES})
    endif()
    add_test(NAME ${name} COMMAND ${name})
    if(NOT T_TIMEOUT)
        set(T_TIMEOUT 300)
    endif()
    set_tests_properties(${name} PROPERTIES
        LABELS "${T_LABELS}"
        TIMEOUT ${T_TIMEOUT}
        # Qt Test's watchdog (5 minutes per test function by default) as patient as ctest.
        ENVIRONMENT "QT_QPA_PLATFORM=offscreen;OUTLIERLENS_DATA_DIR=${PROJECT_SOURCE_DIR}/sample_data;QTEST_FUNCTION_TIMEOUT=${T_TIMEOUT}000")
endfunction()
