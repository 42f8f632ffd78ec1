// The example's program on a bare epoll loop, as a C programmer would write it without a run
// loop: curl's socket callback edits one epoll set, its timer callback sets the epoll_wait
// timeout. The CPU comparison runs this and the RunLoopKit version on the same thread.
#define _GNU_SOURCE
#include "CCurl.h"

#include <errno.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  CURLM *multi;
  int epoll;
  long long deadline_ns;  // when curl's timer expires; -1: no timer
} program;

static long long clock_ns(clockid_t clock) {
  struct timespec now;
  clock_gettime(clock, &now);
  return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static int on_socket(CURL *easy, curl_socket_t socket, int what, void *user, void *known) {
  (void)easy;
  program *p = user;
  if (what == CURL_POLL_REMOVE) {
    // curl closes the socket after this call; remove it first, while the number is still ours.
    if (known) epoll_ctl(p->epoll, EPOLL_CTL_DEL, socket, NULL);
    return 0;
  }
  struct epoll_event event = {.events = 0, .data.fd = socket};
  if (what & CURL_POLL_IN) event.events |= EPOLLIN;
  if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
  if (known) return epoll_ctl(p->epoll, EPOLL_CTL_MOD, socket, &event) == 0 ? 0 : -1;
  if (epoll_ctl(p->epoll, EPOLL_CTL_ADD, socket, &event) != 0) return -1;
  curl_multi_assign(p->multi, socket, (void *)1);
  return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *user) {
  (void)multi;
  program *p = user;
  p->deadline_ns =
      timeout_ms < 0 ? -1 : clock_ns(CLOCK_MONOTONIC) + (long long)timeout_ms * 1000000LL;
  return 0;
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
  (void)data;
  ((ccurl_transfer *)user)->bytes += (long long)(size * count);
  return size * count;
}

// Records every finished transfer; returns how many finished.
static int collect(CURLM *multi) {
  int finished = 0, left = 0;
  CURLMsg *message;
  while ((message = curl_multi_info_read(multi, &left))) {
    if (message->msg != CURLMSG_DONE) continue;
    CURL *easy = message->easy_handle;
    ccurl_transfer *transfer = ccurl_easy_private(easy);
    transfer->result = message->data.result;
    transfer->status = ccurl_easy_status(easy);
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
    finished += 1;
  }
  return finished;
}

// curl_multi_socket_action, timed with the thread's CPU clock.
static void act(CURLM *multi, curl_socket_t socket, int flags, long long *in_curl_ns) {
  int running = 0;
  long long start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  curl_multi_socket_action(multi, socket, flags, &running);
  *in_curl_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

long long ccurl_run_on_epoll(ccurl_transfer *transfers, int count, long max_host_connections,
                             long long *in_curl_ns) {
  *in_curl_ns = 0;
  long long cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  program p = {.multi = curl_multi_init(), .epoll = epoll_create1(EPOLL_CLOEXEC), .deadline_ns = -1};
  if (!p.multi || p.epoll < 0) return -1;
  ccurl_multi_setup(p.multi, on_socket, on_timer, &p, max_host_connections);
  for (int i = 0; i < count; i++) {
    CURL *easy = curl_easy_init();
    transfers[i].bytes = 0;
    ccurl_easy_get(easy, transfers[i].url, transfers[i].timeout_ms, on_body, &transfers[i]);
    curl_multi_add_handle(p.multi, easy);
  }
  int remaining = count;
  struct epoll_event events[64];
  while (remaining > 0) {
    int timeout = -1;
    if (p.deadline_ns >= 0) {
      long long left = p.deadline_ns - clock_ns(CLOCK_MONOTONIC);
      timeout = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
    }
    int ready = epoll_wait(p.epoll, events, 64, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    for (int i = 0; i < ready; i++) {
      int flags = 0;
      if (events[i].events & (EPOLLIN | EPOLLHUP)) flags |= CURL_CSELECT_IN;
      if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (events[i].events & EPOLLERR) flags |= CURL_CSELECT_ERR;
      act(p.multi, events[i].data.fd, flags, in_curl_ns);
    }
    if (p.deadline_ns >= 0 && clock_ns(CLOCK_MONOTONIC) >= p.deadline_ns) {
      p.deadline_ns = -1;
      act(p.multi, CURL_SOCKET_TIMEOUT, 0, in_curl_ns);
    }
    remaining -= collect(p.multi);
  }
  curl_multi_cleanup(p.multi);
  close(p.epoll);
  return clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
}
