# lib.sh: what tests/mpi's scripts share, sourced by SCRIPT SIMSTORE
# SIMSTORE_MPI MPIEXEC: tests/cli/lib.sh (SIMSTORE, T, the checks), the
# sample texts, and `mpi NP ARGS...`: simstore-mpi ARGS under mpirun with
# NP ranks (oversubscribed: the test machines have few cores). An MPMD
# launch (different ranks, different arguments) calls "$MPIEXEC" itself.
. "$(dirname "$0")/../cli/lib.sh"
MPI_BIN=${2:?usage: $(basename "$0") SIMSTORE SIMSTORE_MPI MPIEXEC}
MPIEXEC=${3:-mpirun}
SAMPLE=$SRC/tests/data/sample.jsonl
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# Open MPI's session directory inside the test's own (ctest -j runs several
# of these scripts at once; each gets a directory tree of its own).
export OMPI_MCA_orte_tmpdir_base=$T
mpi() {
    local np=$1
    shift
    timeout 300 "$MPIEXEC" --allow-run-as-root --oversubscribe -np "$np" "$MPI_BIN" "$@"
}
