/* libFuzzer harness for launcher/nodes/rdzv_etcd_plan: what another client of a shared etcd can put in front of
 * an agent. The input is taken twice: as a decision's payload (parsed; one that parses must print and parse back
 * to the same text), and as the JSON answer of a range over the job's prefix (read into a view, then the
 * decision-maker's rule runs on it; a START it decides must name nodes that are up). Nothing may crash, read
 * out of bounds or leak. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nodes/etcd.h"
#include "nodes/rdzv_etcd_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void as_payload(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    struct ddp_re_decision d, again;
    if (ddp_re_decision_parse(text, &d) == 0) {
        char *s = ddp_re_decision_text(&d);
        if (ddp_re_decision_parse(s, &again) != 0)
            abort();
        char *s2 = ddp_re_decision_text(&again);
        if (strcmp(s, s2) != 0)
            abort();
        free(s);
        free(s2);
        ddp_re_decision_free(&again);
    }
    ddp_re_decision_free(&d);
    free(text);
}

/* Every value signed with the job's secret, as its agents would: the rule then sees the fuzzer's payloads. */
static void sign_all(json_t *answer)
{
    size_t i;
    json_t *kv;
    json_array_foreach(json_object_get(answer, "kvs"), i, kv)
    {
        const char *kb = json_string_value(json_object_get(kv, "key"));
        const char *vb = json_string_value(json_object_get(kv, "value"));
        char *key = kb ? ddp_etcd_unb64(kb, NULL) : NULL, *value = vb ? ddp_etcd_unb64(vb, NULL) : NULL;
        if (key && value) {
            char *signed_value = ddp_re_sign("0123456789abcdef", "job", key, value);
            char *b = ddp_etcd_b64(signed_value, strlen(signed_value));
            json_object_set_new(kv, "value", json_string(b));
            free(b);
            free(signed_value);
        }
        free(key);
        free(value);
    }
}

static void read_and_decide(json_t *answer)
{
    struct ddp_re_view v;
    struct ddp_re_decision fallback = {0}, next;
    ddp_re_view_init(&v, 4);
    ddp_re_view_read(&v, "/ddplaunch/f/", "0123456789abcdef", "job", answer, &fallback);
    struct ddp_re_params p = {.min_nodes = 1, .max_nodes = 4, .max_restarts = 2, .join_over = true};
    if (ddp_re_decide(&v, &p, &next)) {
        for (int i = 0; next.state == DDP_RE_START && i < next.n; i++)
            if (next.node[i] < 0 || next.node[i] >= 4 || !v.members[next.node[i]].up)
                abort();
        ddp_re_decision_free(&next);
    }
    ddp_re_view_free(&v);
}

static void as_answer(const uint8_t *data, size_t size)
{
    json_t *answer = json_loadb((const char *)data, size, 0, NULL);
    if (!answer)
        return;
    read_and_decide(answer);
    sign_all(answer);
    read_and_decide(answer);
    json_decref(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    as_payload(data, size);
    as_answer(data, size);
    return 0;
}
