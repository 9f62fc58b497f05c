/* ngcoll_reduce_parts.c: the pieces of a large MPI_Reduce on one node (bench/ngcoll.md,
 * "Open MPI's large reduce"): one message 1->0; two pairs at once (1->0, 3->2); two
 * messages in turn at one root; MPI_Reduce_local at one rank and at two at once; memcpy
 * at two ranks at once. 4 ranks, 64 KiB - 4 MiB, median of 21, printed by rank 0.
 * Usage: mpirun -np 4 ngcoll_reduce_parts */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){
  MPI_Init(&c,&v); int r,p; MPI_Comm_rank(MPI_COMM_WORLD,&r); MPI_Comm_size(MPI_COMM_WORLD,&p);
  size_t sizes[]={65536,262144,1048576,4194304};
  for(int si=0;si<4;si++){ size_t m=sizes[si]; int n=m/4;
    float *a=malloc(m),*b=malloc(m),*t=malloc(m); for(int i=0;i<n;i++){a[i]=1;b[i]=2;t[i]=0;}
    double res[6][21];
    for(int k=0;k<21;k++){
      for(int mode=0;mode<6;mode++){
        /* 0: one msg 1->0; 1: two msgs 1->0,3->2; 2: reduce_local at 0; 3: reduce_local at 0 and 2;
           4: one msg 1->0 then 3->0 (serial at root); 5: memcpy at 0 and 2 */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0=now();
        int recv = (r==0) || ((mode==1||mode==3||mode==5) && r==2);
        if(mode<=1 || mode==4){
          if(r==1 || (r==3 && mode>=1)) MPI_Send(a,n,MPI_FLOAT,mode==4?0:r-1,mode,MPI_COMM_WORLD);
          if(recv){ MPI_Recv(t,n,MPI_FLOAT,r+1,mode,MPI_COMM_WORLD,MPI_STATUS_IGNORE);
                    if(mode==4) MPI_Recv(t,n,MPI_FLOAT,3,mode,MPI_COMM_WORLD,MPI_STATUS_IGNORE);}
        } else if(mode<=3){ if(recv) MPI_Reduce_local(a,b,n,MPI_FLOAT,MPI_SUM); }
        else { if(recv) memcpy(t,a,m); }
        double mine=now()-t0, mx; if(!recv) mine=0;
        MPI_Reduce(&mine,&mx,1,MPI_DOUBLE,MPI_MAX,0,MPI_COMM_WORLD); res[mode][k]=mx;
      }
    }
    if(r==0){ for(int i=0;i<6;i++) qsort(res[i],21,8,cmp);
      printf("m %7zu | 1 msg %7.1f | 2 concurrent msgs %7.1f | 2 msgs serial at root %7.1f | reduce_local %7.1f | 2 concurrent %7.1f | memcpy x2 concurrent %7.1f\n",
        m,res[0][10],res[1][10],res[4][10],res[2][10],res[3][10],res[5][10]); }
    free(a);free(b);free(t);
  }
  MPI_Finalize();
}
