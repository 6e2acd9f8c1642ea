// XPlat's basic types and the system headers that come with them, as MRNet 5.0.1's
// xplat/Types.h gives them to a tool (docs/mrnet.md): part of Canopy's MRNet API
// layer, written for Canopy. MRNet programs use what these headers bring (PRIu64,
// gettimeofday, getpid, htonl, strcmp...) without including them, so they are
// brought here too.
#pragma once

#include <cassert>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// printf's length modifier for size_t and ssize_t: printf("%" PRIszt, n).
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

// A C-style boolean, a macro in MRNet.
#ifndef bool_t
#define bool_t int32_t
#endif
