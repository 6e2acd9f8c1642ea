/* What MRNet 5.0.1's lightweight headers give a C back-end, used as MRNet's own
 * tests and examples use it (issue 48): char_t, uchar_t and enum_t, <inttypes.h>'s
 * PRI macros, gettimeofday and getpid, mrn_printf, XPlat's threads. Strict C99, and
 * nothing of the system's included but through MRNet's headers: a name missing from
 * them fails the build. Exits 0 when every check holds, else prints the failed one. */
#include "mrnet_lightweight/MRNet.h"
#include "xplat_lightweight/Thread.h"

/* Only to see that Packet_set_DestroyData frees what it should (mallinfo2's mapped
 * bytes); under AddressSanitizer LeakSanitizer sees it instead. */
#include <malloc.h>
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NAMES_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NAMES_ASAN 1
#endif

static int failures = 0;
#define CHECK(cond)                                        \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                          \
    }                                                      \
  } while (0)

static void* square(void* arg) {
  long* value = (long*)arg;
  *value = *value * *value;
  return arg;
}

int main(void) {
  char_t c = 'x';
  uchar_t u = 200;
  enum_t e = -3;
  char text[128];
  struct timeval now;
  long value = 12;
  void* returned = NULL;
  Thread_Id thread;
  FILE* file;
  char line[256];
  int n;

  snprintf(text, sizeof text, "%c %u %" PRIi32 " %" PRIu64 " %" PRIszt, c, (unsigned)u, e, (uint64_t)UINT64_MAX,
           (size_t)5);
  CHECK(strcmp(text, "x 200 -3 18446744073709551615 5") == 0);
  CHECK(gettimeofday(&now, NULL) == 0 && now.tv_sec > 0);
  CHECK(getpid() > 0);
  CHECK(MRNET_FAILURE_RECOVERY == 3);

  CHECK(Thread_Create(square, &value, &thread) == 0);
  CHECK(Thread_Join(thread, &returned) == 0);
  CHECK(value == 144 && returned == &value);
  CHECK(Thread_GetId() != thread);

  file = tmpfile();
  CHECK(file != NULL);
  if (file) {
    n = mrn_printf("src/be.c", 7, "main", file, "packet %d of %s\n", 2, "wave");
    rewind(file);
    CHECK(fgets(line, sizeof line, file) != NULL);
    CHECK(strcmp(line, "be.c:7 main(): packet 2 of wave\n") == 0);
    CHECK(n == (int)strlen(line));
    fclose(file);
  }
  {
    /* 8 MiB, which malloc maps: its return shows in mallinfo2's mapped bytes. */
    const uint32_t count = 1u << 20;
    uint64_t* values = (uint64_t*)malloc(count * sizeof(uint64_t));
    Packet_t* packet;
    size_t before;
    CHECK(values != NULL);
    if (values) {
      memset(values, 1, count * sizeof(uint64_t));
      before = mallinfo2().hblkhd;
      packet = new_Packet_t_2(5, FirstApplicationTag, "%auld", values, count);
      CHECK(packet != NULL);
      if (packet) {
        Packet_set_DestroyData(packet, 1);
        delete_Packet_t(packet);
      }
#ifndef NAMES_ASAN
      CHECK(mallinfo2().hblkhd + count * sizeof(uint64_t) <= before);
#else
      (void)before;
#endif
    }
  }
  if (failures == 0) printf("every name MRNet's lightweight headers give is here\n");
  return failures == 0 ? 0 : 1;
}
