/* etcd: the v3 JSON gateway over libcurl's multi interface on libuv. See etcd.h. The shape is the curl docs'
 * multi-uv example: curl says which sockets to poll (on_socket) and when to wake it (on_curl_timer); libuv tells
 * curl what happened (curl_multi_socket_action), and finished transfers are collected in drain(). */
#include "nodes/etcd.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_LINE_MAX (4 << 20) /* a watch line longer than this ends the stream (a broken member) */

static void die(const char *what)
{
    ddp_error("etcd: %s failed (out of memory?)", what);
    abort();
}

/* libcurl, loaded when the first client is made (dlopen, as NVML is): a launch that meets through no etcd never
 * loads it, nor its thirty libraries, and the static build needs nothing but glibc. */
static struct {
    bool tried, ok;
    char error[300];
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
    CURLMcode (*multi_cleanup)(CURLM *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} cu;

static bool load_curl(void)
{
    if (cu.tried)
        return cu.ok;
    cu.tried = true;
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cu.error, sizeof cu.error, "etcd needs libcurl (Debian: apt-get install libcurl4): %s", dlerror());
        return false;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&cu.global_init, "curl_global_init"},
        {(void **)&cu.easy_init, "curl_easy_init"},
        {(void **)&cu.easy_setopt, "curl_easy_setopt"},
        {(void **)&cu.easy_getinfo, "curl_easy_getinfo"},
        {(void **)&cu.easy_cleanup, "curl_easy_cleanup"},
        {(void **)&cu.easy_strerror, "curl_easy_strerror"},
        {(void **)&cu.multi_init, "curl_multi_init"},
        {(void **)&cu.multi_setopt, "curl_multi_setopt"},
        {(void **)&cu.multi_add_handle, "curl_multi_add_handle"},
        {(void **)&cu.multi_remove_handle, "curl_multi_remove_handle"},
        {(void **)&cu.multi_socket_action, "curl_multi_socket_action"},
        {(void **)&cu.multi_info_read, "curl_multi_info_read"},
        {(void **)&cu.multi_assign, "curl_multi_assign"},
        {(void **)&cu.multi_cleanup, "curl_multi_cleanup"},
        {(void **)&cu.slist_append, "curl_slist_append"},
        {(void **)&cu.slist_free_all, "curl_slist_free_all"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(h, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(cu.error, sizeof cu.error, "etcd: libcurl.so.4 has no %s", syms[i].name);
            return false;
        }
    }
    cu.global_init(CURL_GLOBAL_DEFAULT);
    cu.ok = true;
    return true;
}

struct ddp_etcd_req {
    struct ddp_etcd *e;
    struct ddp_etcd_req *next, *prev;
    CURL *easy;
    struct curl_slist *headers;
    char *path, *body;
    char *in; /* the answer so far (a watch: what is left of its last line) */
    size_t inlen, incap;
    long timeout_ms;
    int tries;     /* members tried */
    int member;    /* the member it went to */
    bool watch;    /* a stream: cb per line */
    bool finished; /* the transfer ended with result / http */
    bool dead;     /* cancelled or answered: freed by reap() */
    CURLcode result;
    long http;
    char errbuf[CURL_ERROR_SIZE];
    ddp_etcd_cb cb;
    void *data;
};

struct sock_ctx {
    uv_poll_t poll; /* first: the handle's address is the context's */
    struct sock_ctx *next, *prev;
    curl_socket_t fd;
    struct ddp_etcd *e;
};

struct ddp_etcd {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer; /* curl's timeout */
    char **members;   /* "http://HOST:PORT" */
    int nmembers, cur;
    bool https;
    char *cacert, *cert, *key;
    struct ddp_etcd_req *reqs;
    struct sock_ctx *socks;
    char local_ip[64];
    char member_name[200];
    int handles;  /* libuv handles open */
    int depth;    /* inside dispatch(): close waits for its end */
    bool closing; /* ddp_etcd_close was called */
};

static void free_e(struct ddp_etcd *e)
{
    for (int i = 0; i < e->nmembers; i++)
        free(e->members[i]);
    free(e->members);
    free(e->cacert);
    free(e->cert);
    free(e->key);
    free(e);
}

static void handle_closed(uv_handle_t *h)
{
    struct ddp_etcd *e = h->data;
    if (h->type == UV_POLL)
        free(h);
    if (--e->handles == 0 && e->closing)
        free_e(e);
}

static void sock_close(struct sock_ctx *s)
{
    struct ddp_etcd *e = s->e;
    if (s->prev)
        s->prev->next = s->next;
    else
        e->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    uv_poll_stop(&s->poll);
    s->poll.data = e;
    uv_close((uv_handle_t *)&s->poll, handle_closed);
}

static void req_free(struct ddp_etcd_req *r)
{
    struct ddp_etcd *e = r->e;
    if (r->easy) {
        cu.multi_remove_handle(e->multi, r->easy);
        cu.easy_cleanup(r->easy);
    }
    if (r->prev)
        r->prev->next = r->next;
    else
        e->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    cu.slist_free_all(r->headers);
    free(r->path);
    free(r->body);
    free(r->in);
    free(r);
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct ddp_etcd_req *r = arg;
    size_t len = size * n;
    if (r->dead || r->inlen + len > WATCH_LINE_MAX)
        return 0; /* ends the transfer */
    if (r->inlen + len + 1 > r->incap) {
        r->incap = (r->inlen + len + 1) * 2;
        r->in = ddp_xrealloc(r->in, r->incap);
    }
    memcpy(r->in + r->inlen, p, len);
    r->inlen += len;
    r->in[r->inlen] = '\0';
    return len;
}

/* Point r's transfer at the current member and add it to the multi handle. */
static void req_go(struct ddp_etcd_req *r)
{
    struct ddp_etcd *e = r->e;
    char url[600];
    r->member = e->cur;
    r->tries++;
    r->inlen = 0;
    r->finished = false;
    r->errbuf[0] = '\0';
    snprintf(url, sizeof url, "%s%s", e->members[e->cur], r->path);
    if (!r->easy) {
        r->easy = cu.easy_init();
        if (!r->easy)
            die("curl_easy_init");
        r->headers = cu.slist_append(NULL, "Content-Type: application/json");
        cu.easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
        cu.easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
        cu.easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_data);
        cu.easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
        cu.easy_setopt(r->easy, CURLOPT_PRIVATE, r);
        cu.easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->errbuf);
        cu.easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
        cu.easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
        cu.easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, r->timeout_ms > 0 ? r->timeout_ms : 3000L);
        if (r->timeout_ms > 0)
            cu.easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, r->timeout_ms);
        if (e->cacert)
            cu.easy_setopt(r->easy, CURLOPT_CAINFO, e->cacert);
        if (e->cert)
            cu.easy_setopt(r->easy, CURLOPT_SSLCERT, e->cert);
        if (e->key)
            cu.easy_setopt(r->easy, CURLOPT_SSLKEY, e->key);
    } else {
        cu.multi_remove_handle(e->multi, r->easy);
    }
    cu.easy_setopt(r->easy, CURLOPT_URL, url);
    cu.multi_add_handle(e->multi, r->easy);
}

/* The member could not be reached or could not serve: worth another one. */
static bool member_trouble(const struct ddp_etcd_req *r)
{
    return r->result != CURLE_OK || r->http >= 500;
}

/* Say what went wrong with r's last transfer, in one line. */
static void req_error(const struct ddp_etcd_req *r, char *buf, size_t size)
{
    const struct ddp_etcd *e = r->e;
    const char *m = e->members[r->member];
    const char *host = strstr(m, "://") ? strstr(m, "://") + 3 : m;
    if (r->result != CURLE_OK) {
        snprintf(buf, size, "etcd member %s: %s", host, r->errbuf[0] ? r->errbuf : cu.easy_strerror(r->result));
        return;
    }
    json_t *j = json_loads(r->in ? r->in : "", 0, NULL);
    const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
    if (!msg && j)
        msg = json_string_value(json_object_get(j, "error"));
    snprintf(buf, size, "etcd member %s: HTTP %ld%s%s", host, r->http, msg ? ": " : "", msg ? msg : "");
    json_decref(j);
}

/* Deliver a watch's complete lines. */
static void watch_lines(struct ddp_etcd_req *r)
{
    size_t off = 0;
    char *nl;
    while (!r->dead && r->inlen > off && (nl = memchr(r->in + off, '\n', r->inlen - off))) {
        json_t *obj = json_loadb(r->in + off, (size_t)(nl - (r->in + off)), 0, NULL);
        off = (size_t)(nl - r->in) + 1;
        if (obj)
            r->cb(r->data, obj, NULL);
        json_decref(obj);
    }
    if (r->dead || off == 0) /* nothing taken (r->in may still be NULL) */
        return;
    memmove(r->in, r->in + off, r->inlen - off);
    r->inlen -= off;
}

/* A finished transfer: another member, or the answer. */
static void finished(struct ddp_etcd_req *r)
{
    struct ddp_etcd *e = r->e;
    if (member_trouble(r) && r->member == e->cur)
        e->cur = (e->cur + 1) % e->nmembers; /* the next request goes to the next member */
    if (member_trouble(r) && !r->watch && r->tries < e->nmembers && !e->closing) {
        req_go(r);
        return;
    }
    char *ip = NULL;
    if (r->result == CURLE_OK && cu.easy_getinfo(r->easy, CURLINFO_LOCAL_IP, &ip) == CURLE_OK && ip)
        snprintf(e->local_ip, sizeof e->local_ip, "%s", ip);
    r->dead = true;
    if (r->result == CURLE_OK && r->http == 200 && !r->watch) {
        json_t *j = json_loads(r->in ? r->in : "", 0, NULL);
        if (j)
            r->cb(r->data, j, NULL);
        else
            r->cb(r->data, NULL, "etcd: an answer that is not JSON");
        json_decref(j);
        return;
    }
    char why[400];
    if (r->watch && r->result == CURLE_OK && r->http == 200)
        snprintf(why, sizeof why, "etcd: the watch stream ended");
    else
        req_error(r, why, sizeof why);
    r->cb(r->data, NULL, why);
}

static void finish_close(struct ddp_etcd *e);

/* After curl ran: collect finished transfers, deliver watch lines and answers, free what is done. */
static void dispatch(struct ddp_etcd *e)
{
    CURLMsg *m;
    int left;
    e->depth++;
    while ((m = cu.multi_info_read(e->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct ddp_etcd_req *r = NULL;
        cu.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        r->result = m->data.result;
        cu.easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &r->http);
        r->finished = true;
    }
    for (struct ddp_etcd_req *r = e->reqs; r && !e->closing; r = r->next) {
        if (r->dead)
            continue;
        if (r->watch && r->http == 0)
            cu.easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->http);
        if (r->watch && r->http == 200)
            watch_lines(r);
        if (r->finished && !r->dead)
            finished(r);
    }
    for (struct ddp_etcd_req *r = e->reqs, *next; r; r = next) {
        next = r->next;
        if (r->dead)
            req_free(r);
    }
    if (--e->depth == 0 && e->closing)
        finish_close(e);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct sock_ctx *s = (struct sock_ctx *)p;
    struct ddp_etcd *e = s->e;
    int running = 0, flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    cu.multi_socket_action(e->multi, s->fd, flags, &running);
    dispatch(e);
}

static void on_timer(uv_timer_t *t)
{
    struct ddp_etcd *e = t->data;
    int running = 0;
    cu.multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    dispatch(e);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *arg)
{
    (void)multi;
    struct ddp_etcd *e = arg;
    if (timeout_ms < 0)
        uv_timer_stop(&e->timer);
    else
        uv_timer_start(&e->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static int on_socket(CURL *easy, curl_socket_t fd, int action, void *arg, void *sockp)
{
    (void)easy;
    struct ddp_etcd *e = arg;
    struct sock_ctx *s = sockp;
    if (action == CURL_POLL_REMOVE) {
        if (s) {
            sock_close(s);
            cu.multi_assign(e->multi, fd, NULL);
        }
        return 0;
    }
    if (!s) {
        s = ddp_xcalloc(1, sizeof *s);
        s->fd = fd;
        s->e = e;
        uv_poll_init_socket(e->loop, &s->poll, fd);
        e->handles++;
        s->next = e->socks;
        if (e->socks)
            e->socks->prev = s;
        e->socks = s;
        cu.multi_assign(e->multi, fd, s);
    }
    int ev = (action & CURL_POLL_IN ? UV_READABLE : 0) | (action & CURL_POLL_OUT ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, ev, on_poll);
    return 0;
}

static int parse_members(struct ddp_etcd *e, const char *endpoints, struct ddp_err *err)
{
    char *copy = ddp_xstrdup(endpoints ? endpoints : ""), *save = NULL;
    for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        while (*m == ' ')
            m++;
        if (!*m)
            continue;
        const char *scheme = strstr(m, "://") ? "" : e->https ? "https://" : "http://";
        e->members = ddp_xrealloc(e->members, (size_t)(e->nmembers + 1) * sizeof *e->members);
        size_t n = strlen(scheme) + strlen(m) + 1;
        e->members[e->nmembers] = ddp_xmalloc(n);
        snprintf(e->members[e->nmembers++], n, "%s%s", scheme, m);
    }
    free(copy);
    if (e->nmembers == 0)
        return ddp_errf(err, -EINVAL, "rdzv_endpoint '%s': expected HOST:PORT[,HOST:PORT...] of etcd members",
                        endpoints ? endpoints : "");
    return 0;
}

int ddp_etcd_new(uv_loop_t *loop, const struct ddp_etcd_config *cfg, struct ddp_etcd **out, struct ddp_err *err)
{
    if (!load_curl())
        return ddp_errf(err, -ENOTSUP, "%s", cu.error);
    struct ddp_etcd *e = ddp_xcalloc(1, sizeof *e);
    e->loop = loop;
    e->https = cfg->https;
    int rc = parse_members(e, cfg->endpoints, err);
    if (rc < 0) {
        free_e(e);
        return rc;
    }
    e->cacert = cfg->cacert ? ddp_xstrdup(cfg->cacert) : NULL;
    e->cert = cfg->cert ? ddp_xstrdup(cfg->cert) : NULL;
    e->key = cfg->key ? ddp_xstrdup(cfg->key) : NULL;
    e->multi = cu.multi_init();
    if (!e->multi)
        die("curl_multi_init");
    cu.multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    cu.multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
    cu.multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    cu.multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
    uv_timer_init(loop, &e->timer);
    e->timer.data = e;
    e->handles++;
    *out = e;
    return 0;
}

static struct ddp_etcd_req *req_new(struct ddp_etcd *e, const char *path, json_t *body, long timeout_ms, ddp_etcd_cb cb,
                                    void *data)
{
    struct ddp_etcd_req *r = ddp_xcalloc(1, sizeof *r);
    r->e = e;
    r->path = ddp_xstrdup(path);
    r->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!r->body)
        die("encoding a request");
    r->timeout_ms = timeout_ms;
    r->cb = cb;
    r->data = data;
    r->next = e->reqs;
    if (e->reqs)
        e->reqs->prev = r;
    e->reqs = r;
    req_go(r);
    return r;
}

struct ddp_etcd_req *ddp_etcd_post(struct ddp_etcd *e, const char *path, json_t *body, long timeout_ms, ddp_etcd_cb cb,
                                   void *data)
{
    return req_new(e, path, body, timeout_ms, cb, data);
}

struct ddp_etcd_req *ddp_etcd_watch(struct ddp_etcd *e, json_t *body, ddp_etcd_cb cb, void *data)
{
    struct ddp_etcd_req *r = req_new(e, "/v3/watch", body, 0, cb, data);
    r->watch = true;
    return r;
}

void ddp_etcd_cancel(struct ddp_etcd_req *r)
{
    if (!r)
        return;
    r->dead = true;
    if (r->e->depth == 0)
        req_free(r);
}

const char *ddp_etcd_member(const struct ddp_etcd *e)
{
    const char *m = e->members[e->cur];
    return strstr(m, "://") ? strstr(m, "://") + 3 : m;
}

const char *ddp_etcd_local_ip(const struct ddp_etcd *e)
{
    return e->local_ip;
}

int ddp_etcd_members(const struct ddp_etcd *e)
{
    return e->nmembers;
}

void ddp_etcd_use(struct ddp_etcd *e, int i)
{
    if (i >= 0 && i < e->nmembers)
        e->cur = i;
}

static void finish_close(struct ddp_etcd *e)
{
    while (e->reqs)
        req_free(e->reqs);
    cu.multi_cleanup(e->multi);
    e->multi = NULL;
    while (e->socks)
        sock_close(e->socks);
    uv_timer_stop(&e->timer);
    uv_close((uv_handle_t *)&e->timer, handle_closed);
}

void ddp_etcd_close(struct ddp_etcd *e)
{
    if (!e || e->closing)
        return;
    e->closing = true;
    for (struct ddp_etcd_req *r = e->reqs; r; r = r->next)
        r->dead = true;
    if (e->depth == 0)
        finish_close(e);
}

char *ddp_etcd_b64(const void *p, size_t n)
{
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *out = ddp_xmalloc(len);
    sodium_bin2base64(out, len, p, n, sodium_base64_VARIANT_ORIGINAL);
    return out;
}

char *ddp_etcd_unb64(const char *s, size_t *n)
{
    size_t len = strlen(s), got = 0;
    unsigned char *out = ddp_xmalloc(len + 1);
    if (sodium_base642bin(out, len, s, len, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
        free(out);
        return NULL;
    }
    out[got] = '\0';
    if (n)
        *n = got;
    return (char *)out;
}

long long ddp_etcd_int(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    return json_is_string(v) ? strtoll(json_string_value(v), NULL, 10) : 0;
}
