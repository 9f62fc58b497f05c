"""An unmodified mpi4py program: the six collectives libngcoll serves, on
random sizes, roots, operations and communicators, each result checked
exactly against the value every rank computes locally from the others'
(deterministic) inputs.

Usage: mpirun -np P python3 pycheck.py CASES SEED
Prints on rank 0: "pycheck: N cases on P ranks (K in place), M mismatches".
"""
import random
import sys
from array import array

from mpi4py import MPI

OPS = {
    "sum": (MPI.SUM, lambda a, b: a + b),
    "max": (MPI.MAX, max),
    "min": (MPI.MIN, min),
    "band": (MPI.BAND, lambda a, b: a & b),
}


def value(seed, rank, i):
    """Rank `rank`'s element i: small enough that a sum over 8 ranks stays
    inside an int."""
    return ((seed * 7919 + rank * 104729 + i * 31) % 4001) - 2000


def ints(seed, rank, count):
    return array("i", (value(seed, rank, i) for i in range(count)))


def combined(seed, size, count, fold):
    out = ints(seed, 0, count)
    for r in range(1, size):
        v = ints(seed, r, count)
        out = array("i", (fold(a, b) for a, b in zip(out, v)))
    return out


def block(seed, src, dst, n):
    return bytearray(((seed + src * 13 + dst * 29 + i) % 251) for i in range(n))


def one_case(comm, rng, seed):
    """Runs one collective on `comm`; returns (mismatch, in_place)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    # The same draws in every case, whatever the communicator's size: every
    # rank's generator stays in step with the others'.
    coll = rng.choice(["bcast", "reduce", "allreduce", "allgather", "alltoall", "barrier"])
    # Sizes log-uniform from 0 to 128 Ki elements / bytes.
    empty, log2 = rng.random() < 0.05, rng.uniform(0, 17)
    count = 0 if empty else int(2**log2)
    root = int(rng.random() * size)
    in_place = rng.random() < 0.25
    name = rng.choice(sorted(OPS))
    if coll == "bcast":
        n = count * 4
        buf = block(seed, root, 0, n) if rank == root else bytearray(n)
        comm.Bcast([buf, MPI.BYTE], root=root)
        return buf != block(seed, root, 0, n), False
    if coll in ("reduce", "allreduce"):
        op, fold = OPS[name]
        mine = ints(seed, rank, count)
        want = combined(seed, size, count, fold)
        if coll == "allreduce":
            if in_place:
                comm.Allreduce(MPI.IN_PLACE, [mine, MPI.INT], op=op)
                return mine != want, True
            out = array("i", bytes(4 * count))
            comm.Allreduce([mine, MPI.INT], [out, MPI.INT], op=op)
            return out != want, False
        if in_place and rank == root:
            comm.Reduce(MPI.IN_PLACE, [mine, MPI.INT], op=op, root=root)
            return mine != want, True
        out = array("i", bytes(4 * count))
        comm.Reduce([mine, MPI.INT], [out, MPI.INT], op=op, root=root)
        return rank == root and out != want, in_place and rank == root
    if coll == "allgather":
        n = min(count, 1 << 14)
        out = bytearray(n * size)
        comm.Allgather([block(seed, rank, 0, n), MPI.BYTE], [out, MPI.BYTE])
        want = b"".join(block(seed, r, 0, n) for r in range(size))
        return out != want, False
    if coll == "alltoall":
        n = min(count, 1 << 14)
        send = b"".join(block(seed, rank, d, n) for d in range(size))
        out = bytearray(n * size)
        comm.Alltoall([bytearray(send), MPI.BYTE], [out, MPI.BYTE])
        want = b"".join(block(seed, s, rank, n) for s in range(size))
        return out != want, False
    comm.Barrier()
    return False, False


def main():
    cases, seed = int(sys.argv[1]), int(sys.argv[2])
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    # Every rank draws the same sequence: the same collective, size, root
    # and communicator in the same case.
    rng = random.Random(seed)
    halves = world.Split(rank % 2, rank)
    dup = world.Dup()
    comms = [world, halves, dup]
    mismatches = 0
    in_place = 0
    for k in range(cases):
        comm = comms[rng.randrange(len(comms))]
        bad, ip = one_case(comm, rng, seed * 1000 + k)
        if bad:
            print(f"pycheck: case {k} rank {rank} of {comm.Get_size()}: wrong result", file=sys.stderr)
        mismatches += bad
        in_place += ip
    halves.Free()
    dup.Free()
    total = world.allreduce(mismatches, op=MPI.SUM)
    in_place = world.allreduce(in_place, op=MPI.SUM)
    if rank == 0:
        print(f"pycheck: {cases} cases on {size} ranks ({in_place} in place), {total} mismatches")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
