// Fashion-MNIST's images and labels as tensors, read from the IDX files by idx.hpp.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "idx.hpp"

namespace fashion_mnist {

struct images {
    torch::Tensor x; // [n, 1, 28, 28], normalized
    torch::Tensor y; // [n], int64
};

// Fashion-MNIST's mean and standard deviation of the training pixels.
inline images load(const std::filesystem::path& dir, const char* split, std::size_t limit)
{
    const std::filesystem::path xp = dir / (std::string(split) + "-images-idx3-ubyte.gz"),
                                yp = dir / (std::string(split) + "-labels-idx1-ubyte.gz");
    const gradsync_examples::idx_array xi = gradsync_examples::read_idx_images(xp),
                                       yi = gradsync_examples::read_idx_labels(yp);
    gradsync_examples::check_pair(xi, yi, xp, yp, 10);
    const std::int64_t n = std::int64_t(limit ? std::min<std::size_t>(limit, xi.dims[0]) : xi.dims[0]);
    const std::int64_t h = xi.dims[1], w = xi.dims[2];
    torch::Tensor x = torch::from_blob(const_cast<std::uint8_t*>(xi.data.data()), {n, 1, h, w}, torch::kUInt8)
                          .to(torch::kFloat)
                          .div(255)
                          .sub(0.2860)
                          .div(0.3530);
    torch::Tensor y = torch::from_blob(const_cast<std::uint8_t*>(yi.data.data()), {n}, torch::kUInt8).to(torch::kLong);
    return {x.clone(), y.clone()};
}

} // namespace fashion_mnist
