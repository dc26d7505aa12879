/*
 * mpi_mismatch.c — run by suite "ranks" under mpirun -np 2: ranks that
 * break the collective rules (cast different tensors at the same point,
 * declare different reducing recipes) must get an error naming the group,
 * keep casting with their own amax, and not hang.  Prints one line per
 * check ("ok ..." / "FAIL ...") on rank 0; exit status 0 when all pass.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_error.h"
#include "fp8_probe_mpi.h"

static int fails;

static void check(int rank, int ok, const char *what)
{
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s\n", all ? "ok" : "FAIL", what);
    fails += !all;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fp8_probe_run *run = fp8_probe_open_mpi(argv[1], NULL, NULL, 0, MPI_COMM_WORLD, NULL, NULL, 0);
    check(rank, run != NULL, "open");
    if (!run) {
        MPI_Finalize();
        return 1;
    }
    /* current scaling reduced over world; rank 1 casts the tensors in the other order */
    fp8_probe *a = fp8_probe_declare(run, "a", FP8_ROLE_ACTIVATION, 0, "e4m3:current:reduce=world", NULL, 0);
    fp8_probe *b = fp8_probe_declare(run, "b", FP8_ROLE_ACTIVATION, 0, "e4m3:current:reduce=world", NULL, 0);
    check(rank, a && b, "declare");
    /* a recipe that reduces on rank 0 only: refused on every rank at declare */
    const char *dspec = rank == 0 ? "e4m3:delayed:history=2,reduce=world" : "e4m3:delayed:history=2";
    fp8_probe *d = fp8_probe_declare(run, "d", FP8_ROLE_ACTIVATION, 0, dspec, NULL, 0);
    check(rank, !d && strstr(fp8_error_message(), "declare different tensors or recipes") != NULL,
          "different recipes on the ranks: refused at declare");
    d = fp8_probe_declare(run, "d", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:history=2,reduce=world", NULL, 0);
    check(rank, d != NULL, "the same recipe on every rank: declared");
    float x[4] = {1, 2, 3, rank ? 6.0f : 4.0f}, y[4] = {0.5f, 0.5f, 0.5f, 0.5f}, out[4];
    int e1 = fp8_probe_apply(rank == 0 ? a : b, 0, rank == 0 ? x : y, 1, 4, out);
    const char *m1 = fp8_error_message();
    int said = e1 == FP8_EINVAL && strstr(m1, "group 'world'") && strstr(m1, "different tensors");
    check(rank, said, "mismatched casts: FP8_EINVAL naming the group");
    /* the cast still happened, from this rank's own amax */
    check(rank, rank == 0 ? out[3] == 4.0f : out[0] == 0.5f, "mismatched casts: cast with the local amax");
    int e2 = fp8_probe_apply(rank == 0 ? b : a, 0, rank == 0 ? y : x, 1, 4, out);
    check(rank, e2 == FP8_EINVAL, "the second mismatched cast too");
    /* matched casts afterwards reduce again: rank 1's amax 6 reaches rank 0,
     * whose 1 then casts with scale 448/6 (74.67 -> code 72: x_hat 0.964)
     * instead of its own 448/4 = 112 (exact: x_hat 1) */
    int e3 = fp8_probe_apply(a, 1, x, 1, 4, out);
    check(rank, e3 == FP8_OK && out[0] < 0.99f, "matched casts reduce again");
    fp8_probe_apply(d, 0, x, 1, 4, out);
    int e4 = fp8_probe_step_end(run, 0);
    check(rank, e4 == FP8_OK, "step end with the same reducing recipes");
    int e5 = fp8_probe_close(run);
    check(rank, e5 == FP8_OK, "close");
    MPI_Finalize();
    return fails ? 1 : 0;
}
