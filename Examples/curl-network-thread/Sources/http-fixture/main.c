// The example's local HTTP server: prints its port on 127.0.0.1, then serves until killed.
//   GET /bytes/N  200 with a body of exactly N bytes (keep-alive, Content-Length)
//   GET /stall    reads the request and never answers (for timeouts)
// One thread per connection: simple, and the client is what the example measures.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char body[64 * 1024];

static int write_all(int fd, const char *data, size_t length) {
  while (length > 0) {
    ssize_t written = write(fd, data, length);
    if (written <= 0) return -1;
    data += written;
    length -= (size_t)written;
  }
  return 0;
}

static int answer(int fd, const char *request) {
  long long size = -1;
  char header[256];
  if (strncmp(request, "GET /stall", 10) == 0) {
    char sink[4096];
    while (read(fd, sink, sizeof sink) > 0) {
    }
    return -1;
  }
  if (sscanf(request, "GET /bytes/%lld", &size) != 1 || size < 0) {
    const char *missing = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    return write_all(fd, missing, strlen(missing));
  }
  int length = snprintf(header, sizeof header,
                        "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\n"
                        "Content-Type: application/octet-stream\r\n\r\n",
                        size);
  if (write_all(fd, header, (size_t)length) != 0) return -1;
  while (size > 0) {
    size_t chunk = size < (long long)sizeof body ? (size_t)size : sizeof body;
    if (write_all(fd, body, chunk) != 0) return -1;
    size -= (long long)chunk;
  }
  return 0;
}

static void *serve(void *argument) {
  int fd = (int)(intptr_t)argument;
  char request[8192];
  size_t have = 0;
  for (;;) {
    char *end;
    while (!(end = memmem(request, have, "\r\n\r\n", 4))) {
      if (have == sizeof request - 1) goto done;
      ssize_t got = read(fd, request + have, sizeof request - 1 - have);
      if (got <= 0) goto done;
      have += (size_t)got;
    }
    request[have] = 0;
    size_t used = (size_t)(end + 4 - request);
    if (answer(fd, request) != 0) goto done;
    memmove(request, request + used, have - used);
    have -= used;
  }
done:
  close(fd);
  return NULL;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < sizeof body; i++) body[i] = (char)('a' + i % 26);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
      listen(listener, 512) != 0 ||
      getsockname(listener, (struct sockaddr *)&address, &length) != 0) {
    perror("http-fixture");
    return 1;
  }
  printf("%d\n", ntohs(address.sin_port));
  fflush(stdout);
  for (;;) {
    int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (connection < 0) continue;
    pthread_t thread;
    if (pthread_create(&thread, NULL, serve, (void *)(intptr_t)connection) != 0) {
      close(connection);
      continue;
    }
    pthread_detach(thread);
  }
}
