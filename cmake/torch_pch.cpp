// The translation unit that builds the precompiled LibTorch header (cmake/CommonConfig.cmake,
// outlierlens_torch_pch); the header itself comes in through CMake's generated cmake_pch.hxx.
