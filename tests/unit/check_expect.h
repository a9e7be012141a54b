/* Helpers for the tests of doctor's report (test_check.c, test_doctor.c): count and expect results. */
#ifndef DDP_TEST_CHECK_EXPECT_H
#define DDP_TEST_CHECK_EXPECT_H

#include <criterion/criterion.h>
#include <string.h>

#include "doctor/check.h"

/* How many results check has in r. */
static inline size_t count(const struct ddp_check_report *r, const char *check)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n; i++)
        n += strcmp(r->v[i].check, check) == 0;
    return n;
}

/* The result has status st and text in what it found. */
#define expect_result(res, st, text)                                                                                   \
    do {                                                                                                               \
        const struct ddp_check_result *res_ = (res);                                                                   \
        cr_expect_eq(res_->status, (st), "%s: status %s, expected %s: %s", res_->check,                                \
                     ddp_check_status_name(res_->status), ddp_check_status_name(st), res_->found);                     \
        cr_expect(strstr(res_->found, (text)) != NULL, "%s: '%s' not in: %s", res_->check, (text), res_->found);       \
    } while (0)

#endif
