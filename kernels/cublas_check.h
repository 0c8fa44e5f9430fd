// CHECK_CUBLAS for the workloads that call cuBLAS (they link CUDA::cublas).
#pragma once

#include <cublas_v2.h>

#include "common.h"

#define CHECK_CUBLAS(call)                                                      \
  do {                                                                          \
    cublasStatus_t st_ = (call);                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, \
                   static_cast<int>(st_));                                      \
      std::exit(2);                                                             \
    }                                                                           \
  } while (0)
