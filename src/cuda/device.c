/* Device discovery and the plain device-memory helpers of the CUDA backend. */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "zbpp/cuda.h"

bool zb_cuda_built(void) { return true; }

zb_status_t zb_cuda_device_count(int *n, zb_err_t *err)
{
    *n = 0;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess) {
        *n = count;
        return ZB_OK;
    }
    cudaGetLastError(); /* clear it: "no device" is an answer, not a sticky failure */
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
    case cudaErrorSystemNotReady:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
        return ZB_OK; /* no driver or no usable device: 0 devices */
    default:
        return zb_err_set(err, ZB_EIO, "CUDA device query failed: %s", cudaGetErrorString(e));
    }
}

zb_status_t zb_cuda_device_describe(int dev, char *buf, size_t len, zb_err_t *err)
{
    int n = 0;
    zb_status_t s = zb_cuda_device_count(&n, err);
    if (s != ZB_OK)
        return s;
    if (dev < 0 || dev >= n)
        return zb_err_set(err, ZB_EINVAL, "no CUDA device %d (%d found)", dev, n);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess)
        return zb_err_set(err, ZB_EIO, "CUDA device %d: %s", dev, cudaGetErrorString(e));
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB", p.name, p.major, p.minor,
             p.multiProcessorCount, (double)p.totalGlobalMem / (1 << 30));
    return ZB_OK;
}

zb_status_t zb_cuda_device_memory(int dev, size_t *used, size_t *total, zb_err_t *err)
{
    *used = 0, *total = 0;
    int was = 0;
    cudaError_t e = cudaGetDevice(&was);
    if (e == cudaSuccess)
        e = cudaSetDevice(dev);
    size_t free_b = 0, total_b = 0;
    if (e == cudaSuccess)
        e = cudaMemGetInfo(&free_b, &total_b);
    cudaSetDevice(was); /* the caller's device stays current */
    if (e != cudaSuccess) {
        cudaGetLastError();
        return zb_err_set(err, ZB_EIO, "CUDA device %d memory: %s", dev, cudaGetErrorString(e));
    }
    *used = total_b - free_b, *total = total_b;
    return ZB_OK;
}
