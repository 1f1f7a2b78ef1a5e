# SPDX-License-Identifier: Apache-2.0
# Detection of collguard's optional dependencies. Each sets CG_HAVE_<X> to
# 1 or 0 and, when found, an imported target the layers link.
find_package(PkgConfig QUIET)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

set(CG_HAVE_CUDA 0)
set(CG_HAVE_CUDA_KERNELS 0)
if(CG_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart_static)
    set(CG_HAVE_CUDA 1)
    # The shim's CUDA kernels (batched copies) need CUDA's compiler; without
    # it the same copies are made one cudaMemcpyAsync each. Hopper by
    # default (sm_90: the H100/H200 the GPU suite runs on);
    # -DCMAKE_CUDA_ARCHITECTURES=... for other GPUs.
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
      enable_language(CUDA)
      # Link with the C compiler everywhere (no separable compilation, and
      # the CUDA runtime is linked explicitly), so sanitizer and linker
      # flags keep meaning what they mean for C.
      set(CMAKE_CUDA_LINKER_PREFERENCE 0)
      set(CMAKE_CUDA_LINKER_PREFERENCE_PROPAGATES 0)
      set(CG_HAVE_CUDA_KERNELS 1)
    endif()
  endif()
endif()

# NCCL only with CUDA: its backend is the one user of it, and a build
# without CUDA that still said NCCL=1 reported horovod_nccl_built() true
# and failed to link its tests. (The NCCL plugins declare NCCL's structs
# themselves and need neither.)
set(CG_HAVE_NCCL 0)
if(CG_WITH_NCCL AND NOT CG_HAVE_CUDA)
  message(STATUS "NCCL: not used (CUDA is off or not found)")
elseif(CG_WITH_NCCL)
  find_path(CG_NCCL_INCLUDE nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
  find_library(CG_NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(CG_NCCL_INCLUDE AND CG_NCCL_LIBRARY)
    set(CG_HAVE_NCCL 1)
    file(STRINGS ${CG_NCCL_INCLUDE}/nccl.h _cg_nccl_ver REGEX "define NCCL_VERSION_CODE")
    message(STATUS "NCCL: ${CG_NCCL_INCLUDE} ${_cg_nccl_ver}")
  endif()
endif()

set(CG_HAVE_MPI 0)
if(CG_WITH_MPI)
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND)
    set(CG_HAVE_MPI 1)
  endif()
endif()

set(CG_HAVE_UCX 0)
if(CG_WITH_UCX AND PkgConfig_FOUND)
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
  if(UCX_FOUND)
    set(CG_HAVE_UCX 1)
  endif()
endif()

set(CG_HAVE_CRITERION 0)
if(PkgConfig_FOUND)
  pkg_check_modules(CRITERION QUIET IMPORTED_TARGET criterion)
  if(CRITERION_FOUND)
    set(CG_HAVE_CRITERION 1)
  endif()
endif()

# libmicrohttpd (Debian: libmicrohttpd-dev): the metrics endpoint
# (CG_METRICS_PORT); without it the endpoint is not built and setting the
# variable is an error at start.
set(CG_HAVE_MICROHTTPD 0)
if(CG_WITH_MICROHTTPD AND PkgConfig_FOUND)
  pkg_check_modules(MICROHTTPD QUIET IMPORTED_TARGET libmicrohttpd)
  if(MICROHTTPD_FOUND)
    set(CG_HAVE_MICROHTTPD 1)
  endif()
endif()
