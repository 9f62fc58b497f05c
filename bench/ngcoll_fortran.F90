! ngcoll_fortran.F90: libngcoll as a Fortran program sees it.
!
! On one rank: what a call costs when nothing moves (MPI_Bcast of one
! INTEGER, MPI_Barrier; 10^6 calls each, best of 5 rounds, ns per call):
! run without libngcoll and with it preloaded, the difference is what its
! Fortran entry points add (handle conversion, the gate) to the library's
! own binding.
! On more ranks: MPI_Bcast (root 0) and MPI_Allreduce (sum) of INTEGER
! buffers of 8 B to 2 MiB (8 B, 64 B, ..., 2 MiB: a factor of 8 apart),
! CALLS calls back to back after a barrier, the slowest rank's mean per
! call, best of 5 rounds, in µs.
! Build: mpif90 -O2 [-DF08] ngcoll_fortran.F90 -o ngcoll_fortran.
program ngcoll_fortran
#ifdef F08
    use mpi_f08
#else
    use mpi
#endif
    implicit none
    integer, parameter :: max_elems = 524288
    integer :: ierr, i, round, x, size, rank, k, calls, n, coll
    integer, allocatable :: a(:), b(:)
    double precision :: t, best_b, best_r, mine, slowest, best
    character(len=9), parameter :: cname(2) = [character(len=9) :: 'bcast', 'allreduce']
    call MPI_Init(ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    if (size == 1) then
        calls = 1000000
        x = 1
        best_b = huge(1d0)
        best_r = huge(1d0)
        do round = 1, 5
            t = MPI_Wtime()
            do i = 1, calls
                call MPI_Bcast(x, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
            end do
            best_b = min(best_b, MPI_Wtime() - t)
            t = MPI_Wtime()
            do i = 1, calls
                call MPI_Barrier(MPI_COMM_WORLD, ierr)
            end do
            best_r = min(best_r, MPI_Wtime() - t)
        end do
        print '(a,f6.1,a,f6.1,a)', 'fortran: 1 rank: bcast ', best_b / calls * 1d9, ' ns, barrier ', &
            best_r / calls * 1d9, ' ns per call'
    else
        allocate (a(max_elems), b(max_elems))
        a = rank
        do coll = 1, 2
            n = 2
            do k = 0, 6
                calls = max(20, min(2000, 4000000 / (4 * n)))
                best = huge(1d0)
                do round = 1, 5
                    call MPI_Barrier(MPI_COMM_WORLD, ierr)
                    t = MPI_Wtime()
                    do i = 1, calls
                        if (coll == 1) then
                            call MPI_Bcast(a, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
                        else
                            call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
                        end if
                    end do
                    mine = (MPI_Wtime() - t) / calls
                    call MPI_Allreduce(mine, slowest, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
                    best = min(best, slowest)
                end do
                if (rank == 0) print '(a,a,a,i0,a,f10.2,a)', 'fortran: ', trim(cname(coll)), ' ', 4 * n, ' B ', &
                    best * 1d6, ' us'
                n = n * 8
            end do
        end do
    end if
    call MPI_Finalize(ierr)
end program
