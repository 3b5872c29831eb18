// The head sizes the flash-attention kernels have (flash_attn.cu, flash_attn32.cu: 16, 32, 64,
// 128) and the step from a run-time head size to a template instance: flash_dispatch(hs, f)
// calls f(std::integral_constant<int, HS>()) for HS = hs and returns true, or returns false
// for a head size without a kernel.
#ifndef ZBPP_CUDA_FLASH_DISPATCH_H
#define ZBPP_CUDA_FLASH_DISPATCH_H

#include <type_traits>

template <typename F> inline bool flash_dispatch(int hs, F &&f)
{
    switch (hs) {
    case 16: f(std::integral_constant<int, 16>()); return true;
    case 32: f(std::integral_constant<int, 32>()); return true;
    case 64: f(std::integral_constant<int, 64>()); return true;
    case 128: f(std::integral_constant<int, 128>()); return true;
    }
    return false;
}

#endif
