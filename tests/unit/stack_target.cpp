// canopy-stack-target: a process with a known call stack for the stack walker's tests
// (stack_test.cpp). The main thread sits in main → outer_function → inner_function,
// blocked reading stdin; a second thread sits in worker_loop → worker_wait, blocked
// reading a pipe nobody writes. Each line read on stdin is answered with "pong" on
// stdout, from inside inner_function, so a test can prove the process still runs
// after a walk. It prints "ready" once the worker thread is started; it exits when
// stdin closes.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace stack_target {

// noinline and a use of the result after the call keep each function a frame of its own.
__attribute__((noinline)) void worker_wait(int fd) {
  char byte;
  while (read(fd, &byte, 1) != 0) {
  }
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void* worker_loop(void* arg) {
  worker_wait(*static_cast<int*>(arg));
  asm volatile("" ::: "memory");
  return nullptr;
}

__attribute__((noinline)) int inner_function(int fd) {
  char line[256];
  int lines = 0;
  while (true) {
    ssize_t n = read(fd, line, sizeof line);  // the blocking call the walker must see
    if (n <= 0) return lines;
    for (ssize_t i = 0; i < n; ++i) {
      if (line[i] == '\n') {
        ++lines;
        static const char pong[] = "pong\n";
        if (write(STDOUT_FILENO, pong, sizeof pong - 1) < 0) return lines;
      }
    }
  }
}

__attribute__((noinline)) int outer_function(int fd) {
  int lines = inner_function(fd);
  asm volatile("" ::: "memory");
  return lines + 1;
}

}  // namespace stack_target

int main() {
  int never[2];
  if (pipe(never) != 0) return 1;
  pthread_t worker;
  if (pthread_create(&worker, nullptr, stack_target::worker_loop, &never[0]) != 0) return 1;
  static const char ready[] = "ready\n";
  if (write(STDOUT_FILENO, ready, sizeof ready - 1) < 0) return 1;
  int lines = stack_target::outer_function(STDIN_FILENO);
  return lines > 0 ? 0 : 0;
}
