#include <lmdb.h>

#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/// Gives the first `length` bytes of file `fd` their disk blocks without writing them or
/// changing the file's size (Linux `fallocate` with `FALLOC_FL_KEEP_SIZE`, which Glibc's Swift
/// module does not export). 0, or -1 with `errno` set (`EOPNOTSUPP` where the file system
/// cannot). Unlike `posix_fallocate`, it never falls back to writing zeros: the file may be
/// another process's LMDB lock file, in use through a shared memory map.
static inline int arbor_reserve_blocks(int fd, long long length) {
    return (int)syscall(SYS_fallocate, fd, 0x01 /* FALLOC_FL_KEEP_SIZE */, (off_t)0, (off_t)length);
}
#endif
