// GRADSYNC_HD marks what runs on the host and, under nvcc, on a GPU too; GRADSYNC_UNROLL
// asks the device compiler to unroll a loop. Plain C++ sees neither.
#pragma once

#if defined(__CUDACC__)
#define GRADSYNC_HD __host__ __device__
#else
#define GRADSYNC_HD
#endif
#if defined(__CUDA_ARCH__)
#define GRADSYNC_UNROLL _Pragma("unroll")
#else
#define GRADSYNC_UNROLL
#endif
