#ifndef CCURL_H
#define CCURL_H
#include <curl/curl.h>

// Typed, non-variadic wrappers for the curl calls the example needs (Swift cannot call C's
// variadic functions).
typedef int (*ccurl_socket_fn)(CURL *easy, curl_socket_t socket, int what, void *user,
                               void *socket_data);
typedef int (*ccurl_timer_fn)(CURLM *multi, long timeout_ms, void *user);
typedef size_t (*ccurl_write_fn)(char *data, size_t size, size_t count, void *user);

// Sets the multi handle's socket and timer callbacks (both with `user`) and its per-host
// connection limit.
CURLMcode ccurl_multi_setup(CURLM *multi, ccurl_socket_fn socket, ccurl_timer_fn timer,
                            void *user, long max_host_connections);
// Sets an easy handle up for a GET of `url` whose body goes to `write` with `user` (also its
// CURLOPT_PRIVATE), giving up after `timeout_ms`.
CURLcode ccurl_easy_get(CURL *easy, const char *url, long timeout_ms, ccurl_write_fn write,
                        void *user);
// The easy handle's CURLOPT_PRIVATE.
void *ccurl_easy_private(CURL *easy);
// The last HTTP status the easy handle received (0 if none).
long ccurl_easy_status(CURL *easy);
// The result of a CURLMSG_DONE message.
CURLcode ccurl_message_result(const CURLMsg *message);

// The same program on a bare epoll loop: runs `count` GETs (each with its own timeout) on one
// multi handle with at most `max_host_connections` per host, until all are done. Fills each
// one's byte count, curl result and HTTP status. Returns the CPU time this thread used, in
// nanoseconds, or -1 if a system call failed; `in_curl_ns` gets the part spent inside
// curl_multi_socket_action (curl's own work and its reads).
typedef struct {
  const char *url;
  long timeout_ms;
  long long bytes;
  int result;
  long status;
} ccurl_transfer;
long long ccurl_run_on_epoll(ccurl_transfer *transfers, int count, long max_host_connections,
                             long long *in_curl_ns);

#endif
