// A tool back-end living inside the ranks of an MPI job: each rank attaches to the
// Canopy tree as the back-end of its MPI rank (attach mode), and answers a request
// with {its rank, the MPI_Allreduce sum of all ranks}: proof that the MPI job and the
// tree both work. Usage: mpirun -np N mpi_backend ATTACH_FILE [views]
//
// With `views`, for a job that loses ranks (mpirun --enable-recovery): no MPI
// collective after MPI_Init (they would wait for the dead), and each rank answers
// with {its rank, its pid, the id of the membership view it holds, the sum of the
// ranks of that view's members}: the survivors' reductions go on over the tree.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "canopy/backend.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool views = argc == 3 && std::string(argv[2]) == "views";
  if (argc != 2 && !views) {
    std::fprintf(stderr, "usage: mpi_backend ATTACH_FILE [views]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int code = 0;
  {
    auto backend = canopy::Backend::attach(argv[1], static_cast<canopy::Rank>(rank));
    if (!backend) {
      std::fprintf(stderr, "mpi_backend %d: %s\n", rank, backend.error().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    auto& be = **backend;
    while (true) {
      auto in = be.receive(std::chrono::minutes(5));
      if (!in) break;  // the tree shut down
      if (!*in) {
        code = 3;
        break;
      }
      if (views) {
        const canopy::View view = be.view();
        std::int32_t members_sum = 0;
        for (canopy::Rank r : view.members) members_sum += static_cast<std::int32_t>(r);
        (void)be.send((*in)->stream, canopy::Packet{(*in)->packet.tag(),
                                                    {std::int32_t(rank), std::int32_t(getpid()),
                                                     std::int32_t(view.id), members_sum}});
        continue;
      }
      int sum = 0;
      MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      (void)be.send((*in)->stream, canopy::Packet{(*in)->packet.tag(), {std::int32_t(rank), std::int32_t(sum)}});
    }
  }
  MPI_Finalize();
  return code;
}
