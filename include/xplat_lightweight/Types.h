/* XPlat's basic types and the system headers that come with them, as MRNet 5.0.1's
 * xplat_lightweight/Types.h gives them to a C back-end (docs/mrnet.md): part of
 * Canopy's MRNet API layer, written for Canopy. MRNet's C programs use what these
 * headers bring (PRIu64, gettimeofday, getpid...) without including them. */
#ifndef CANOPY_XPLAT_LIGHTWEIGHT_TYPES_H
#define CANOPY_XPLAT_LIGHTWEIGHT_TYPES_H

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

/* printf's length modifier for size_t and ssize_t: printf("%" PRIszt, n). */
#ifndef PRIszt
#define PRIszt "zu"
#define PRIsszt "zd"
#endif

typedef int XPlat_Socket;
typedef uint16_t XPlat_Port;

#ifndef XPLAT_MAX_HOSTNAME_LEN
#define XPLAT_MAX_HOSTNAME_LEN (_POSIX_HOST_NAME_MAX + 1)
#endif
#ifndef XPLAT_PATH_MAX_LEN
#define XPLAT_PATH_MAX_LEN (_POSIX_PATH_MAX + 1)
#endif

/* C-style booleans, macros in MRNet. */
#ifndef __cplusplus
#ifndef true
#define true (1)
#endif
#ifndef false
#define false (0)
#endif
#endif
#ifndef bool_t
#define bool_t int
#endif

#endif
