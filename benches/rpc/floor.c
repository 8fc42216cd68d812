/* The floor of a TVM RPC server for tiny calls (benches/rpc/bench.py): a server that does
   no work. It answers the handshake and each packet with a canned reply chosen by the
   packet's code, parsing nothing else, one connection at a time, on 127.0.0.1:PORT.
   Whatever a real server spends per call above this is its own; below it nothing can go.

     cc -O2 -o target/rpc_floor benches/rpc/floor.c && target/rpc_floor PORT

   The replies are TVM 0.27's wire form (src/runtime/rpc/minrpc/rpc_reference.h) as tvmrt
   rpc-server sends them: each a u64 length, the i32 code kReturn (4), the i32 count of
   values, then (i32 type index, 8-byte value) pairs. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
/* Handshake: magic 0xFF271, the key's length, "server:". */
static const unsigned char HS[] = {0x71, 0xf2, 0x0f, 0x00, 7, 0, 0, 0,
                                   's', 'e', 'r', 'v', 'e', 'r', ':'};
/* InitServer, FreeHandle and anything else: return None. */
static const unsigned char NONE[] = {12, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0,
                                     1, 0, 0, 0, 0, 0, 0, 0};
/* GetGlobalFunc: a function handle (type index 4, an opaque pointer), any value. */
static const unsigned char GETFUNC[] = {20, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0,
                                        4, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0};
/* CallFunc of runtime.RuntimeEnabled("cpu"), as tvmrt sends it: two values, int 2 (type
   index 1) and the answer, bool true (type index 2). */
static const unsigned char CALL[] = {32, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0,
                                     1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
                                     2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
static unsigned char buf[1 << 16];
static size_t have, at;
static int fill(int fd, size_t need) {
  if (at > 0 && have - at < need) { memmove(buf, buf + at, have - at); have -= at; at = 0; }
  while (have - at < need) {
    ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
    if (n <= 0) return -1;
    have += n;
  }
  return 0;
}
static void sendall(int fd, const unsigned char *p, size_t n) {
  while (n) { ssize_t k = send(fd, p, n, 0); if (k <= 0) return; p += k; n -= k; }
}
int main(int argc, char **argv) {
  int port = atoi(argv[1]);
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (void *)&a, sizeof a) || listen(ls, 8)) { perror("bind"); return 1; }
  for (;;) {
    int fd = accept(ls, 0, 0);
    if (fd < 0) continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    have = at = 0;
    if (fill(fd, 8)) goto done;
    int32_t kl; memcpy(&kl, buf + 4, 4);
    if (kl < 0 || kl > 4096 || fill(fd, 8 + kl)) goto done;
    at = 8 + kl;
    sendall(fd, HS, sizeof HS);
    for (;;) {
      if (fill(fd, 8)) break;
      uint64_t n; memcpy(&n, buf + at, 8);
      if (n > sizeof buf - 8 || fill(fd, 8 + n)) break;
      int32_t code; memcpy(&code, buf + at + 8, 4);
      at += 8 + n;
      if (code == 1) break;
      if (code == 9) sendall(fd, GETFUNC, sizeof GETFUNC);
      else if (code == 3) sendall(fd, CALL, sizeof CALL);
      else sendall(fd, NONE, sizeof NONE);
    }
  done:
    close(fd);
  }
}
