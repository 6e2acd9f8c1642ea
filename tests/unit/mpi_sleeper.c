/* canopy-mpi-sleeper: an MPI program that only waits, for the MPIR tests
   (stack_test.cpp): once every rank has called MPI_Init, mpirun's MPIR process table
   is filled. Each rank sleeps up to 60 s, so a test that forgets it still ends. */
#include <mpi.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  for (int i = 0; i < 600; ++i) usleep(100 * 1000);
  MPI_Finalize();
  return 0;
}
