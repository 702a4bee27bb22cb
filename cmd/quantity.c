/* quantity.c: whole numbers written as 1e9, 2^30, 1.5G or 64MiB. */
#include "quantity.h"

#include <stddef.h>

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* *v = *v * m, or -1 on overflow. */
static int mul(uint64_t *v, uint64_t m)
{
    if (m != 0 && *v > UINT64_MAX / m)
        return -1;
    *v *= m;
    return 0;
}

static int pow10_u64(unsigned e, uint64_t *out)
{
    uint64_t v = 1;
    for (unsigned i = 0; i < e; i++)
        if (mul(&v, 10))
            return -1;
    *out = v;
    return 0;
}

int quantity_parse(const char *s, uint64_t *out)
{
    if (!s || !is_digit(*s))
        return -1;
    if (s[0] == '2' && s[1] == '^') {
        const char *p = s + 2;
        unsigned e = 0;
        if (!is_digit(*p))
            return -1;
        for (; is_digit(*p); p++) {
            e = e * 10 + (unsigned)(*p - '0');
            if (e > 63)
                return -1;
        }
        if (*p)
            return -1;
        *out = (uint64_t)1 << e;
        return 0;
    }
    /* The digits, without the decimal point: value = digits * 10^(exp - frac). */
    uint64_t digits = 0;
    unsigned frac = 0;
    const char *p = s;
    for (; is_digit(*p); p++)
        if (mul(&digits, 10) || digits > UINT64_MAX - (uint64_t)(*p - '0'))
            return -1;
        else
            digits += (uint64_t)(*p - '0');
    if (*p == '.') {
        p++;
        if (!is_digit(*p))
            return -1;
        for (; is_digit(*p); p++, frac++)
            if (frac >= 19 || mul(&digits, 10) || digits > UINT64_MAX - (uint64_t)(*p - '0'))
                return -1;
            else
                digits += (uint64_t)(*p - '0');
    }
    unsigned exp = 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+')
            p++;
        if (!is_digit(*p))
            return -1;
        for (; is_digit(*p); p++) {
            exp = exp * 10 + (unsigned)(*p - '0');
            if (exp > 40)
                return -1;
        }
    }
    unsigned shift = 0;
    switch (lower(*p)) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if (lower(*p) == 'i')
            p++;
    }
    if (lower(*p) == 'b')
        p++;
    if (*p)
        return -1;
    uint64_t scale, divisor = 1;
    if (exp >= frac) {
        if (pow10_u64(exp - frac, &scale))
            return -1;
    } else {
        scale = 1;
        if (pow10_u64(frac - exp, &divisor))
            return -1;
    }
    uint64_t v = digits;
    if (mul(&v, scale) || mul(&v, (uint64_t)1 << shift) || v % divisor != 0)
        return -1;
    *out = v / divisor;
    return 0;
}
