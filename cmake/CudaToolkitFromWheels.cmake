# Which CUDA toolkit builds the Python module (README: "Building").
#
# pip's build requirements (pyproject.toml) bring NVIDIA's CUDA 13.0 compiler, runtime and headers as wheels, all
# in one prefix, site-packages/nvidia/cu13: a machine with a C++ compiler and pip builds cuweave without a CUDA
# toolkit. That prefix is the toolkit unless the builder chose another: CUWEAVE_CUDA_TOOLKIT=system (CMake
# variable or environment), CMAKE_CUDA_COMPILER, or CUDACXX. Without the wheels (pip install --no-build-isolation
# into an environment that lacks them), CMake finds the system's toolkit as usual.
#
# The wheels ship only versioned shared libraries and no lib64/, which FindCUDAToolkit's search misses; cuweave
# links cudart statically (libcudart_static.a is there) and loads NVRTC, CUPTI and NCCL at run time, so naming the
# compiler and the root is enough.
set(CUWEAVE_CUDA_TOOLKIT "$ENV{CUWEAVE_CUDA_TOOLKIT}" CACHE STRING
    "Which CUDA toolkit builds cuweave: 'wheels' (NVIDIA's pip wheels), 'system', or empty: the wheels where found")

# (A CMAKE_CUDA_COMPILER this file set on an earlier configure of the same build tree is not the builder's choice.)
if((CMAKE_CUDA_COMPILER AND NOT CMAKE_CUDA_COMPILER STREQUAL CUWEAVE_WHEEL_NVCC) OR DEFINED ENV{CUDACXX}
   OR CUWEAVE_CUDA_TOOLKIT STREQUAL "system")
  message(STATUS "cuweave: the CUDA compiler chosen before (CMAKE_CUDA_COMPILER, CUDACXX, this build tree's cache, or "
                 "CUWEAVE_CUDA_TOOLKIT=system)")
  return()
endif()

# nvidia is a namespace package: each NVIDIA wheel adds its files under one of its paths. A prefix counts only
# with the compiler's parts beside nvcc (cicc from nvidia-nvvm, the runtime's headers): other packages, such as
# PyTorch's, bring some NVIDIA wheels but not these.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
    "import os, nvidia; parts = ('bin/nvcc', 'nvvm/bin/cicc', 'include/cuda_runtime.h', 'lib/libcudart_static.a'); print(next(os.path.join(p, 'cu13') for p in nvidia.__path__ if all(os.path.isfile(os.path.join(p, 'cu13', part)) for part in parts)))"
  OUTPUT_VARIABLE cuweave_wheel_toolkit
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET
  RESULT_VARIABLE cuweave_no_wheel_toolkit)

if(cuweave_no_wheel_toolkit)
  if(CUWEAVE_CUDA_TOOLKIT STREQUAL "wheels")
    message(FATAL_ERROR "CUWEAVE_CUDA_TOOLKIT=wheels, but ${Python_EXECUTABLE} finds no nvidia/cu13 with nvcc, cicc, "
                        "cuda_runtime.h and libcudart_static.a: "
                        "pip install the build requirements of pyproject.toml (nvidia-cuda-nvcc and the others), "
                        "or build with pip's build isolation")
  endif()
  message(STATUS "cuweave: no CUDA toolkit from NVIDIA's wheels here; CMake looks for the system's")
  return()
endif()

message(STATUS "cuweave: the CUDA toolkit of NVIDIA's wheels, ${cuweave_wheel_toolkit}")
set(CUWEAVE_WHEEL_NVCC "${cuweave_wheel_toolkit}/bin/nvcc" CACHE INTERNAL "nvcc of NVIDIA's wheels")
set(CMAKE_CUDA_COMPILER "${CUWEAVE_WHEEL_NVCC}" CACHE FILEPATH "nvcc of NVIDIA's wheels" FORCE)
set(CUDAToolkit_ROOT "${cuweave_wheel_toolkit}" CACHE PATH "the toolkit of NVIDIA's wheels" FORCE)
