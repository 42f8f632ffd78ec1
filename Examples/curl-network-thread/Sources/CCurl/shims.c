#include "CCurl.h"

CURLMcode ccurl_multi_setup(CURLM *multi, ccurl_socket_fn socket, ccurl_timer_fn timer,
                            void *user, long max_host_connections) {
  CURLMcode code = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket);
  if (code == CURLM_OK) code = curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, user);
  if (code == CURLM_OK) code = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer);
  if (code == CURLM_OK) code = curl_multi_setopt(multi, CURLMOPT_TIMERDATA, user);
  if (code == CURLM_OK)
    code = curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max_host_connections);
  return code;
}

CURLcode ccurl_easy_get(CURL *easy, const char *url, long timeout_ms, ccurl_write_fn write,
                        void *user) {
  CURLcode code = curl_easy_setopt(easy, CURLOPT_URL, url);
  if (code == CURLE_OK) code = curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write);
  if (code == CURLE_OK) code = curl_easy_setopt(easy, CURLOPT_WRITEDATA, user);
  if (code == CURLE_OK) code = curl_easy_setopt(easy, CURLOPT_PRIVATE, user);
  if (code == CURLE_OK) code = curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
  // No SIGALRM-based DNS timeouts: signals and threads do not mix.
  if (code == CURLE_OK) code = curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  return code;
}

void *ccurl_easy_private(CURL *easy) {
  void *pointer = NULL;
  curl_easy_getinfo(easy, CURLINFO_PRIVATE, &pointer);
  return pointer;
}

long ccurl_easy_status(CURL *easy) {
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

CURLcode ccurl_message_result(const CURLMsg *message) { return message->data.result; }
