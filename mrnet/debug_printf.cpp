// mrn_printf (include/mrnet/Types.h), here and not in network.cpp: the filter
// plug-in has it too, for filter functions that print in the commnodes.
#include "mrnet/debug_printf.h"

#include <atomic>
#include <cstring>
#include <string>

#include "mrnet/Types.h"

namespace MRN {

namespace {
std::atomic<FILE*> printf_default{nullptr};
}

void mrn_printf_init(FILE* fp) { printf_default = fp; }

int mrn_printf(const char* file, int line, const char* func, FILE* fp, const char* format, ...) {
  if (!fp) fp = printf_default.load();
  va_list args;
  va_start(args, format);
  const int n = layer::debug_printf(fp ? fp : stderr, file, line, func, format, args);
  va_end(args);
  return n;
}

namespace layer {

int debug_printf(FILE* fp, const char* file, int line, const char* func, const char* format, va_list args) {
  if (!fp || !format) return -1;
  const char* base = file ? std::strrchr(file, '/') : nullptr;
  char head[512];
  std::snprintf(head, sizeof head, "%s:%d %s(): ", base ? base + 1 : file ? file : "?", line, func ? func : "?");
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  if (n < 0) {
    va_end(again);
    return n;
  }
  // One write, so that the lines of several threads do not interleave.
  std::string text = head;
  const std::size_t at = text.size();
  text.resize(at + static_cast<std::size_t>(n) + 1);
  std::vsnprintf(text.data() + at, static_cast<std::size_t>(n) + 1, format, again);
  va_end(again);
  text.resize(at + static_cast<std::size_t>(n));
  return std::fputs(text.c_str(), fp) < 0 ? -1 : static_cast<int>(text.size());
}

}  // namespace layer
}  // namespace MRN
