// ResNet-50's layer layout, shared by the GPU benchmark (device.cu) and the device path's
// launch count test (tests/test_device_launches.cpp): many small layers in one fused vector.
#pragma once

#include <cstddef>
#include <vector>

namespace gradsync_bench {

// ResNet-50's 107 learnable layers in torchvision's order (examples/profiles/resnet50.csv,
// 25 557 032 parameters: convolutions, batch norms' scale and shift, the classifier's weights
// and bias), scaled to `count` elements in all: the layer boundaries are rounded, so the
// sizes add up to count.
inline std::vector<std::size_t> resnet50_layers(std::size_t count)
{
    std::vector<std::size_t> params{9408, 128}; // conv1, bn1
    std::size_t in = 64;
    const std::size_t widths[] = {64, 128, 256, 512};
    const int blocks[] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage) {
        const std::size_t w = widths[stage];
        for (int b = 0; b < blocks[stage]; ++b) { // a bottleneck: 1x1, 3x3, 1x1 convolutions, each with its norm
            params.insert(params.end(), {in * w, 2 * w, 9 * w * w, 2 * w, 4 * w * w, 8 * w});
            if (b == 0)
                params.insert(params.end(), {in * 4 * w, 8 * w}); // the downsampling shortcut
            in = 4 * w;
        }
    }
    params.push_back(2048 * 1000 + 1000); // fc
    std::size_t total = 0;
    for (std::size_t p : params)
        total += p;
    std::vector<std::size_t> layers;
    std::size_t seen = 0, placed = 0;
    for (std::size_t p : params) {
        seen += p;
        const std::size_t end = (seen * count + total / 2) / total;
        layers.push_back(end - placed);
        placed = end;
    }
    return layers;
}

} // namespace gradsync_bench
