// main for the GPU tests: without a usable CUDA device the program says why and exits with
// 77, which CTest reports as skipped (SKIP_RETURN_CODE), so CI without a GPU builds these
// tests and skips them cleanly.
#include <cuda_runtime.h>

#include <cstdio>

#include "../catch_session.hpp"

int main(int argc, char** argv)
{
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        std::printf("skipped: no usable CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 77;
    }
    return gradsync_test::run_catch(argc, argv);
}
