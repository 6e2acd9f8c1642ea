// mrn_printf's work, for the C++ layer and the lightweight C library alike.
#pragma once

#include <cstdarg>
#include <cstdio>

namespace MRN::layer {

// Writes "file:line func(): " and `format` with `args` to `fp` in one write; returns
// the number of characters written, or a negative number on failure.
int debug_printf(FILE* fp, const char* file, int line, const char* func, const char* format, va_list args);

}  // namespace MRN::layer
