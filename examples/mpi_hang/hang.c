/* mpi_hang: an MPI job that hangs on purpose, for canopy stack (docs/stack.md).
 *
 *   mpirun -np 8 ./mpi_hang [SECONDS]
 *
 * Every rank but one calls MPI_Barrier from main; the odd one (rank 3, or the last
 * rank in a job of fewer than 4) is stuck in compute() <- solve() <- main() and
 * reaches the barrier only after SECONDS (default 600), so the job ends by itself.
 * canopy stack on it shows two classes: "7 ranks [0-2,4-7]: MPI_Barrier <- main" and
 * "1 rank [3]: ... <- compute <- solve <- main". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int steps;

/* noinline and a statement after each call: the frames stay frames when optimised. */
__attribute__((noinline)) static void compute(time_t until) {
  while (time(NULL) < until) {
    sleep(1);
    ++steps;
  }
}

__attribute__((noinline)) static void solve(time_t until) {
  compute(until);
  ++steps;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long seconds = argc > 1 ? strtol(argv[1], NULL, 10) : 600;
  const int odd_one = size > 3 ? 3 : size - 1;
  /* Every rank meets every other once first, so that the TCP connections are made
   * while all run: Open MPI 4.1.4 now and then crashed a rank (a null pointer under
   * mca_btl_tcp's event handler) as a peer connected to it under load, and a tool
   * that stops ranks to walk them makes that moment longer. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == odd_one) solve(time(NULL) + seconds);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_hang: %d ranks passed the barrier\n", size);
  MPI_Finalize();
  return 0;
}
