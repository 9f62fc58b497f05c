/* ngcoll_fresh_pages.c: what first writing freshly mapped memory costs here (the
 * buffers a library allocates on every call), against writing a buffer in use; best of
 * 21, 128 KiB - 4 MiB (bench/ngcoll.md). Usage: cc -O2 ngcoll_fresh_pages.c && ./a.out */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
int main(){ size_t sizes[]={131072,524288,1048576,4194304};
 for(int i=0;i<4;i++){ size_t m=sizes[i]; double best=1e9, bestw=1e9;
  char*w=malloc(m); memset(w,1,m);
  for(int k=0;k<21;k++){ double t0=now(); char*p=mmap(0,m,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); memset(p,1,m); munmap(p,m); double t=now()-t0; if(t<best)best=t;
   t0=now(); memset(w,k,m); t=now()-t0; if(t<bestw)bestw=t; }
  printf("%8zu B: fresh pages written %8.1f us (%.3f ns/B), warm buffer written %8.1f us (%.3f ns/B)\n",m,best,best*1e3/m,bestw,bestw*1e3/m);}
}
