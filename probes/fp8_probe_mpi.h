/*
 * fp8_probe_mpi.h — the probe API on several ranks (MPI).
 *
 *   MPI_Comm groups[] = {dp_comm, tp_comm};
 *   const char *names[] = {"dp", "tp"};
 *   fp8_probe_run *run = fp8_probe_open_mpi("run.h5", NULL, meta, 1, MPI_COMM_WORLD, names, groups, 2);
 *   fp8_probe *p = fp8_probe_declare(run, "layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 0,
 *                                    "e4m3:delayed:reduce=tp", NULL, 0);
 *   ... the training loop as with fp8_probe_open ...
 *
 * Each rank R records into its own crash-safe run file (run.rank<R>.h5,
 * beside run.h5) and rank 0 writes run.h5, the index every fp8prof command
 * accepts as the whole run (fp8_ranks.h, docs/schema.md).  Each rank file's
 * /meta says mpi_rank, mpi_world_size, mpi_groups and, per group NAME,
 * mpi_group.NAME: the world ranks of this rank's instance of the group.
 *
 * Amax reduction (TransformerEngine's amax_reduction_group): a delayed or
 * current recipe with the option reduce=NAME takes the max of its amax over
 * the ranks of the communicator registered as NAME before it computes the
 * scale ("world" is always registered).  Delayed: at fp8_probe_step_end,
 * the step's amax (history slot 0) is reduced, so every rank of the group
 * enters the same amax in its history and computes the same next scale.
 * Current: at each recorded cast, the tensor's amax is reduced before the
 * scale.  Shadow recipes may reduce over other groups than the active one:
 * the same tensors under another reduction, side by side.  The per-rank
 * amax stays what /records and /steps hold; the scale is the reduced one.
 *
 * Collective rules: fp8_probe_open_mpi and fp8_probe_declare are collective
 * over world (and open over each group communicator); fp8_probe_step_end
 * and casts of tensors with a reducing recipe are collective over the
 * groups they reduce in: every rank declares the same tensors with the same
 * recipes in the same order and casts them in the same order, from one
 * thread.  Mismatches are detected (a fingerprint is reduced first): a
 * declaration that differs between ranks is refused on every rank; a cast
 * out of order returns FP8_EINVAL naming the group and scales from this
 * rank's amax — no hang, no abort.  A rank that skips a cast the others
 * make waits, as in any collective.
 * Evaluation casts (fp8_probe_cast, set_training(0)) use the local amax.
 * fp8_probe_close is collective over world.
 */
#ifndef FP8_PROBE_MPI_H
#define FP8_PROBE_MPI_H

#include <mpi.h>

#include "fp8_probe.h"

#define FP8_PROBE_MAX_GROUPS 8

/* Open rank R's file and (rank 0) the index at path.  names[i] names
 * communicator groups[i] (letters, digits, '_', '-'; not "world", which is
 * world itself); each must contain the calling rank.  The communicators
 * are duplicated (the caller keeps its own).  NULL on every rank when any
 * rank failed (message says which rank and why). */
fp8_probe_run *fp8_probe_open_mpi(const char *path, const fp8_probe_options *opts, const char *const *kv, int nkv,
                                  MPI_Comm world, const char *const *names, const MPI_Comm *groups, int ngroups);

#endif
