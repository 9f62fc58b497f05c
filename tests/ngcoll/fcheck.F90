! fcheck.F90: libngcoll under a Fortran program.
!
! Random cases (the same on every rank: one seed) of MPI_Bcast, MPI_Reduce,
! MPI_Allreduce, MPI_Allgather, MPI_Alltoall and MPI_Barrier called from
! Fortran (and MPI_Bcast of MPI_BOTTOM with a datatype of absolute
! addresses; `use mpi_f08`: MPI_Bcast and MPI_Barrier without ierror),
! each result checked against the value it must have, computed
! locally: the data are exact small integers (INTEGER, and DOUBLE
! PRECISION holding integers, whose sums are exact in any order), so every
! comparison is exact. Cases draw the collective, the communicator (world,
! a duplicate, halves of MPI_Comm_split, a split by rank mod 3), sizes
! log-uniform from 0 to 256 Ki elements, the root, the datatype, the
! operation (sum, max, min; band on INTEGER) and MPI_IN_PLACE where the
! standard allows it. Then LOOPS times a duplicate of MPI_COMM_WORLD is
! made, used and freed, and LOOPS times made, used and disconnected (each
! must come back as MPI_COMM_NULL): under an MPI whose communicators are
! few, a shadow left behind by either release runs them out. Every call's
! ierror is checked (set to -1 before it), and MPI_Init_thread's provided
! against MPI_Query_thread.
!
! Build: mpif90 -O2 fcheck.F90 (use mpi), mpif90 -O2 -DF08 fcheck.F90
! (use mpi_f08). Usage: fcheck CASES SEED LOOPS (an odd SEED starts MPI
! with MPI_Init_thread, an even one with MPI_Init). Prints one summary
! line on rank 0; aborts with code 1 on any mismatch.
program fcheck
#ifdef F08
    use mpi_f08
#else
    use mpi
#endif
    implicit none
#ifdef F08
    type(MPI_Comm) :: comms(4), comm, tmp
    type(MPI_Datatype) :: dt, bt
    type(MPI_Op) :: op
    character(len=*), parameter :: flavour = 'use mpi_f08'
#else
    integer :: comms(4), comm, tmp, dt, op, bt
    character(len=*), parameter :: flavour = 'use mpi'
#endif
    integer, parameter :: maxe = 262144
    ! target: ia is also reached through MPI_BOTTOM and its address.
    integer, allocatable, target :: ia(:)
    integer, allocatable :: ib(:)
    double precision, allocatable :: da(:), db(:)
    integer :: ierr, wrank, wsize, rank, n, ncases, seed, nloops
    integer :: c, coll, count, root, opk, j, r, bad, allbad, blk, vlen
    integer :: in_place_cases, ip_int, k, provided, query, blens(1)
    integer(kind=MPI_ADDRESS_KIND) :: addr(1)
    logical :: ip, dbl, mpich
    integer(8) :: state
    character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: ver
    character(len=32) :: arg
    character(len=9), parameter :: cname(0:6) = &
        [character(len=9) :: 'bcast', 'reduce', 'allreduce', 'allgather', 'alltoall', 'barrier', 'bottom']

    call get_command_argument(1, arg)
    read (arg, *) ncases
    call get_command_argument(2, arg)
    read (arg, *) seed
    call get_command_argument(3, arg)
    read (arg, *) nloops
    if (mod(seed, 2) == 0) then
        call MPI_Init(ierr)
    else
        call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
        ! The level the library provided reaches the caller.
        call MPI_Query_thread(query, ierr)
        if (provided /= query) then
            print '(a,i0,a,i0)', 'fcheck: MPI_Init_thread provided ', provided, ', MPI_Query_thread says ', query
            call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
        end if
    end if
    call MPI_Comm_rank(MPI_COMM_WORLD, wrank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, wsize, ierr)
    call MPI_Get_library_version(ver, vlen, ierr)
    ! MPICH 4.0.2 crashes on an in-place reduce to a root other than 0
    ! (pmodels/mpich#6540): with MPICH, in place means root 0.
    mpich = index(ver(1:vlen), 'MPICH') > 0
    state = int(seed, 8) * 7919_8 + 1_8

    comms(1) = MPI_COMM_WORLD
    call MPI_Comm_dup(MPI_COMM_WORLD, comms(2), ierr)
    call MPI_Comm_split(MPI_COMM_WORLD, (2 * wrank) / wsize, wrank, comms(3), ierr)
    k = 1
    if (mod(wrank, 3) == 0) k = 0
    call MPI_Comm_split(MPI_COMM_WORLD, k, wrank, comms(4), ierr)

    allocate (ia(maxe), ib(maxe), da(maxe), db(maxe))
    bad = 0
    in_place_cases = 0
    do c = 1, ncases
        coll = rnd(7)
        comm = comms(1 + rnd(4))
        call MPI_Comm_rank(comm, rank, ierr)
        call MPI_Comm_size(comm, n, ierr)
        count = rnd_count()
        root = rnd(n)
        dbl = rnd(3) == 0
        opk = rnd(4)
        if (dbl .and. opk == 3) opk = 0
        ip = rnd(3) == 0
        if (dbl) then
            dt = MPI_DOUBLE_PRECISION
        else
            dt = MPI_INTEGER
        end if
        select case (opk)
        case (0)
            op = MPI_SUM
        case (1)
            op = MPI_MAX
        case (2)
            op = MPI_MIN
        case default
            op = MPI_BAND
        end select
        ia = -7
        ib = -7
        da = -7
        db = -7
        ! Every call must store its error code (use mpi_f08: where given).
        ierr = -1
        select case (coll)
        case (0) ! bcast
            if (rank == root) call fill(ia, da, rank, 0, count)
#ifdef F08
            ! ierror left out: the binding gets a null pointer for it.
            if (dbl) then
                call MPI_Bcast(da, count, dt, root, comm)
            else
                call MPI_Bcast(ia, count, dt, root, comm)
            end if
            ierr = MPI_SUCCESS
#else
            if (dbl) then
                call MPI_Bcast(da, count, dt, root, comm, ierr)
            else
                call MPI_Bcast(ia, count, dt, root, comm, ierr)
            end if
#endif
            call expect_from(ia, da, root, 0, count, 0)
        case (1) ! reduce
            if (ip .and. mpich) root = 0
            ip_int = 0
            if (ip .and. rank == root) ip_int = 1
            call fill(ia, da, rank, 0, count)
            if (ip_int == 1) then
                call fill(ib, db, rank, 0, count)
                in_place_cases = in_place_cases + 1
                if (dbl) then
                    call MPI_Reduce(MPI_IN_PLACE, db, count, dt, op, root, comm, ierr)
                else
                    call MPI_Reduce(MPI_IN_PLACE, ib, count, dt, op, root, comm, ierr)
                end if
            else if (dbl) then
                call MPI_Reduce(da, db, count, dt, op, root, comm, ierr)
            else
                call MPI_Reduce(ia, ib, count, dt, op, root, comm, ierr)
            end if
            if (rank == root) call expect_reduced(ib, db, count)
        case (2) ! allreduce
            if (ip) then
                call fill(ib, db, rank, 0, count)
                in_place_cases = in_place_cases + 1
                if (dbl) then
                    call MPI_Allreduce(MPI_IN_PLACE, db, count, dt, op, comm, ierr)
                else
                    call MPI_Allreduce(MPI_IN_PLACE, ib, count, dt, op, comm, ierr)
                end if
            else
                call fill(ia, da, rank, 0, count)
                if (dbl) then
                    call MPI_Allreduce(da, db, count, dt, op, comm, ierr)
                else
                    call MPI_Allreduce(ia, ib, count, dt, op, comm, ierr)
                end if
            end if
            call expect_reduced(ib, db, count)
        case (3) ! allgather: block r of the result is rank r's data
            blk = count / n
            if (ip) then
                call fill_at(ib, db, rank, 0, blk, rank * blk)
                in_place_cases = in_place_cases + 1
                if (dbl) then
                    call MPI_Allgather(MPI_IN_PLACE, 0, dt, db, blk, dt, comm, ierr)
                else
                    call MPI_Allgather(MPI_IN_PLACE, 0, dt, ib, blk, dt, comm, ierr)
                end if
            else
                call fill(ia, da, rank, 0, blk)
                if (dbl) then
                    call MPI_Allgather(da, blk, dt, db, blk, dt, comm, ierr)
                else
                    call MPI_Allgather(ia, blk, dt, ib, blk, dt, comm, ierr)
                end if
            end if
            do r = 0, n - 1
                call expect_at(ib, db, r, 0, blk, r * blk)
            end do
        case (4) ! alltoall: block j of rank r's send data goes to rank j
            blk = count / n
            do j = 0, n - 1
                if (ip) then
                    call fill_at(ib, db, rank, j * blk, blk, j * blk)
                else
                    call fill_at(ia, da, rank, j * blk, blk, j * blk)
                end if
            end do
            if (ip) then
                in_place_cases = in_place_cases + 1
                if (dbl) then
                    call MPI_Alltoall(MPI_IN_PLACE, 0, dt, db, blk, dt, comm, ierr)
                else
                    call MPI_Alltoall(MPI_IN_PLACE, 0, dt, ib, blk, dt, comm, ierr)
                end if
            else if (dbl) then
                call MPI_Alltoall(da, blk, dt, db, blk, dt, comm, ierr)
            else
                call MPI_Alltoall(ia, blk, dt, ib, blk, dt, comm, ierr)
            end if
            do r = 0, n - 1
                call expect_at(ib, db, r, rank * blk, blk, r * blk)
            end do
        case (5)
#ifdef F08
            call MPI_Barrier(comm)
            ierr = MPI_SUCCESS
#else
            call MPI_Barrier(comm, ierr)
#endif
        case default ! bcast at MPI_BOTTOM: a datatype of the buffer's absolute address
            count = max(count, 1)
            if (rank == root) call fill(ia, da, rank, 0, count)
            call MPI_Get_address(ia, addr(1), ierr)
            blens(1) = count
            call MPI_Type_create_hindexed(1, blens, addr, MPI_INTEGER, bt, ierr)
            call MPI_Type_commit(bt, ierr)
            ierr = -1
            call MPI_Bcast(MPI_BOTTOM, 1, bt, root, comm, ierr)
            k = ierr
            call MPI_Type_free(bt, ierr)
            ierr = k
            dbl = .false.
            call expect_from(ia, da, root, 0, count, 0)
        end select
        if (ierr /= MPI_SUCCESS) then
            bad = bad + 1
            print '(a,i0,a,a,a,i0)', 'fcheck: case ', c, ' (', trim(cname(coll)), '): ierror ', ierr
        end if
    end do

    do k = 1, 2 * nloops
        call MPI_Comm_dup(MPI_COMM_WORLD, tmp, ierr)
        j = wrank
        call MPI_Allreduce(MPI_IN_PLACE, j, 1, MPI_INTEGER, MPI_SUM, tmp, ierr)
        if (j /= wsize * (wsize - 1) / 2) bad = bad + 1
        ierr = -1
        if (k <= nloops) then
            call MPI_Comm_free(tmp, ierr)
        else
            call MPI_Comm_disconnect(tmp, ierr)
        end if
        ! The handle comes back as MPI_COMM_NULL.
        if (ierr /= MPI_SUCCESS .or. tmp /= MPI_COMM_NULL) bad = bad + 1
    end do

    call MPI_Allreduce(bad, allbad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (wrank == 0) then
        print '(a,a,a,i0,a,i0,a,i0,a,i0,a,i0,a)', 'fcheck: ', flavour, ': ', ncases, ' cases on ', wsize, &
            ' ranks (', in_place_cases, ' in place), ', allbad, ' mismatches; ', nloops, &
            ' communicators freed and as many disconnected'
    end if
    if (allbad /= 0) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    call MPI_Comm_free(comms(2), ierr)
    call MPI_Comm_free(comms(3), ierr)
    call MPI_Comm_free(comms(4), ierr)
    call MPI_Finalize(ierr)

contains

    ! Park-Miller: the same sequence on every rank.
    integer function rnd(m)
        integer, intent(in) :: m
        state = mod(state * 48271_8, 2147483647_8)
        rnd = int(mod(state, int(m, 8)))
    end function

    ! Log-uniform in [1, maxe]; 0 in 1/16 of the cases.
    integer function rnd_count()
        double precision :: u
        if (rnd(16) == 0) then
            rnd_count = 0
            return
        end if
        u = dble(rnd(1000000)) / 1.0d6
        rnd_count = min(maxe, int(exp(log(dble(maxe)) * u)))
    end function

    ! The value element i of block b of rank r's data holds.
    integer function v(r, i)
        integer, intent(in) :: r, i
        v = mod(i * 131 + r * 977 + c * 31 + seed, 2039) - 1000
    end function

    subroutine fill(xi, xd, r, base, m)
        integer, intent(inout) :: xi(:)
        double precision, intent(inout) :: xd(:)
        integer, intent(in) :: r, base, m
        call fill_at(xi, xd, r, base, m, base)
    end subroutine

    ! Elements at + 1 .. at + m get rank r's values of base + 1 .. base + m.
    subroutine fill_at(xi, xd, r, base, m, at)
        integer, intent(inout) :: xi(:)
        double precision, intent(inout) :: xd(:)
        integer, intent(in) :: r, base, m, at
        integer :: e
        do e = 1, m
            xi(at + e) = v(r, base + e)
            xd(at + e) = dble(v(r, base + e))
        end do
    end subroutine

    subroutine expect_from(xi, xd, r, base, m, at)
        integer, intent(in) :: xi(:)
        double precision, intent(in) :: xd(:)
        integer, intent(in) :: r, base, m, at
        call expect_at(xi, xd, r, base, m, at)
    end subroutine

    ! Elements at + 1 .. at + m must hold rank r's values of base + 1 .. base + m.
    subroutine expect_at(xi, xd, r, base, m, at)
        integer, intent(in) :: xi(:)
        double precision, intent(in) :: xd(:)
        integer, intent(in) :: r, base, m, at
        integer :: e
        do e = 1, m
            if (dbl) then
                if (xd(at + e) /= dble(v(r, base + e))) then
                    call mismatch(at + e)
                    return
                end if
            else if (xi(at + e) /= v(r, base + e)) then
                call mismatch(at + e)
                return
            end if
        end do
    end subroutine

    ! Elements 1 .. m must hold the operation over every rank's values.
    subroutine expect_reduced(xi, xd, m)
        integer, intent(in) :: xi(:)
        double precision, intent(in) :: xd(:)
        integer, intent(in) :: m
        integer :: e, q, acc
        do e = 1, m
            acc = v(0, e)
            do q = 1, n - 1
                select case (opk)
                case (0)
                    acc = acc + v(q, e)
                case (1)
                    acc = max(acc, v(q, e))
                case (2)
                    acc = min(acc, v(q, e))
                case default
                    acc = iand(acc, v(q, e))
                end select
            end do
            if ((dbl .and. xd(e) /= dble(acc)) .or. (.not. dbl .and. xi(e) /= acc)) then
                call mismatch(e)
                return
            end if
        end do
    end subroutine

    subroutine mismatch(e)
        integer, intent(in) :: e
        bad = bad + 1
        print '(a,i0,a,a,a,i0,a,i0,a,i0,a,i0,a,l1,a,l1)', 'fcheck: case ', c, ' (', trim(cname(coll)), &
            ') rank ', rank, ' of ', n, ': element ', e, ' wrong, count ', count, ' double ', dbl, &
            ' in place ', ip
    end subroutine

end program
