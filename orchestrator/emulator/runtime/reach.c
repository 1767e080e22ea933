/* The security groups between emulated instances, where they all share one machine's loopback: preloaded into
 * every process of an instance (LD_PRELOAD), connect() to another instance's address (127.0.0.0/8, not the
 * emulator's 127.0.0.1 nor the instance's own) passes only to the TCP ports listed for that address in the file
 * TENCENTCLOUD_EMULATOR_REACH names, which the emulator rewrites as groups and instances change (netfilter.py).
 * A refused connection fails as a dropped one does on Tencent Cloud, with ETIMEDOUT, at once.
 *
 * The file: one "A.B.C.D LOW HIGH" line per reachable port range (the instance's own address among them). Re-read
 * at every connect: it is small, and rules change while instances run. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static int reachable(in_addr_t address, unsigned port) {
    const char *path = getenv("TENCENTCLOUD_EMULATOR_REACH");
    if (path == NULL || *path == '\0')
        return 1;
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 0; /* no table yet: the instance reaches no other */
    char text[64];
    unsigned low, high;
    int found = 0;
    while (!found && fscanf(file, "%63s %u %u", text, &low, &high) == 3) {
        struct in_addr listed;
        if (inet_pton(AF_INET, text, &listed) == 1 && listed.s_addr == address && port >= low && port <= high)
            found = 1;
    }
    fclose(file);
    return found;
}

int connect(int fd, const struct sockaddr *address, socklen_t length) {
    static connect_fn real_connect;
    if (real_connect == NULL)
        real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    if (address != NULL && address->sa_family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)address;
        in_addr_t host = ntohl(in->sin_addr.s_addr);
        if ((host >> 24) == 127 && host != 0x7f000001u && !reachable(in->sin_addr.s_addr, ntohs(in->sin_port))) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return real_connect(fd, address, length);
}
