# NCCL for gradsync::cuda, looked for beside the CUDA toolkit (find CUDAToolkit first). Sets
# GRADSYNC_NCCL_INCLUDE_DIR and GRADSYNC_NCCL_LIBRARY; both are set when the toolkit has it.
# Used by the build and by the installed package's config, so both find the same NCCL.
find_path(GRADSYNC_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(GRADSYNC_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
