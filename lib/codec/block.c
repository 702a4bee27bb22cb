/* block.c: block encoder and the table-driven block decoder (the inner loop of
 * every query). */
#include "codec/block.h"

#include "common/error.h"

#include <inttypes.h>
#include <string.h>

uint64_t sims_codec_block_max_count(size_t block_bytes, unsigned min_len, int raw_first)
{
    uint64_t bits = (uint64_t)block_bytes * 8;
    if (raw_first) {
        if (bits < 64)
            return 0;
        return 1 + (min_len ? (bits - 64) / min_len : 0);
    }
    return min_len ? bits / min_len : 0;
}

/* ---- encoder --------------------------------------------------------------- */

void sims_codec_block_encoder_start(codec_block_encoder *e, const codec_huff_encoder *h,
                                    uint8_t *buf, size_t block_bytes, int raw_first, uint64_t prev)
{
    memset(buf, 0, block_bytes + BITIO_WRITER_SLACK);
    e->huff = h;
    bitio_writer_init(&e->bits, buf, block_bytes);
    e->prev = prev;
    e->last_pos = 0;
    e->count = 0;
    e->raw_first = raw_first ? 1 : 0;
}

void sims_codec_block_encoder_put_implicit(codec_block_encoder *e, uint64_t v)
{
    e->prev = v;
    e->count++;
}

void sims_codec_block_encoder_drop_last(codec_block_encoder *e)
{
    /* Zero bits [last_pos, pos): the bitstream is LSB-first, so that is the
     * high bits of the first byte and every byte after it. */
    uint8_t *buf = e->bits.buf;
    uint64_t from = e->last_pos, to = e->bits.pos;
    size_t byte = (size_t)(from >> 3);
    if (from & 7) {
        buf[byte] &= (uint8_t)((1u << (from & 7)) - 1);
        byte++;
    }
    size_t end = (size_t)((to + 7) >> 3);
    if (end > byte)
        memset(buf + byte, 0, end - byte);
    e->bits.pos = from;
}

int sims_codec_block_encoder_put(codec_block_encoder *e, uint64_t v)
{
    uint64_t capacity = (uint64_t)e->bits.size * 8;
    uint64_t start = e->bits.pos;
    if (e->raw_first) {
        if (capacity - e->bits.pos < 64)
            return 0;
        bitio_put(&e->bits, v, 64);
        e->raw_first = 0;
    } else {
        uint64_t d = v - e->prev;
        unsigned j = codec_delta_symbol(d);
        unsigned len = e->huff->len[j];
        if (!len)
            return sims_fail(SIMSTORE_EINVAL,
                             "difference %#" PRIx64 " (leading bit %u) has no Huffman code: "
                             "the histogram counted no such difference",
                             d, j);
        if (len + j > capacity - e->bits.pos)
            return 0;
        uint64_t mantissa = d & bitio_mask(j);
        if (len + j <= BITIO_PEEK_BITS) {
            bitio_put57(&e->bits, e->huff->code[j] | mantissa << len, len + j);
        } else {
            bitio_put57(&e->bits, e->huff->code[j], len);
            bitio_put(&e->bits, mantissa, j);
        }
    }
    e->prev = v;
    e->last_pos = start;
    e->count++;
    return 1;
}

int sims_codec_block_encode(const codec_huff_encoder *h, uint8_t *buf, size_t block_bytes,
                            int raw_first, uint64_t prev, const uint64_t *fps, size_t n,
                            size_t *used)
{
    codec_block_encoder e;
    sims_codec_block_encoder_start(&e, h, buf, block_bytes, raw_first, prev);
    *used = 0;
    for (size_t i = 0; i < n; i++) {
        if ((i > 0 || !raw_first) && fps[i] <= e.prev)
            return sims_fail(SIMSTORE_EINVAL, "fingerprints not strictly increasing at %zu", i);
        int rc = sims_codec_block_encoder_put(&e, fps[i]);
        if (rc < 0)
            return rc;
        if (rc == 0)
            break;
        *used = i + 1;
    }
    return SIMSTORE_OK;
}

/* ---- decoder --------------------------------------------------------------- */

void sims_codec_block_decoder_init(codec_block_decoder *s, const codec_huff_decoder *h,
                                   const uint8_t *data, size_t block_bytes, int raw_first,
                                   uint64_t prev, uint64_t count)
{
    s->huff = h;
    s->data = data;
    s->block_bytes = block_bytes;
    s->pos = 0;
    s->prev = prev;
    s->remaining = count;
    s->key = 0;
    s->raw_first = raw_first ? 1 : 0;
    s->implicit_last = 0;
}

void sims_codec_block_decoder_set_last(codec_block_decoder *s, uint64_t key)
{
    s->key = key;
    s->implicit_last = 1;
}

/* v = prev + d, reporting whether it wrapped past 2^64 (a valid block never
 * does: its values ascend to the key). */
static inline uint64_t add_wraps(uint64_t prev, uint64_t d, uint64_t *v)
{
#if defined(__GNUC__) || defined(__clang__)
    return (uint64_t)__builtin_add_overflow(prev, d, v);
#else
    *v = prev + d;
    return (uint64_t)(*v < prev);
#endif
}

/* The difference coded by entry e from the window `win` (which starts at
 * the code): the j mantissa bits after the code, below an implicit 1-bit at
 * position j. Shifting left by 63 - j drops the bits above the mantissa;
 * setting bit 63 and shifting back puts the leading 1 at j. Valid when the
 * code and mantissa lie inside the window (total <= 57). */
static inline uint64_t entry_delta(codec_huff_entry e, uint64_t win)
{
    unsigned shift = CODEC_ENTRY_SHIFT(e) & 63;
    return ((win >> CODEC_ENTRY_LEN(e)) << shift | (uint64_t)1 << 63) >> shift;
}

/* The fast loop keeps two windows of the stream, loaded from the current
 * position: `win` = bits [pos, pos + 57) and `win_hi` = bits [pos + 32,
 * pos + 89). A value of at most 57 bits decodes from `win` alone, and the
 * next value's table index (11 bits) is already inside one of the two
 * windows, whatever this value's length. So the chain that limits speed,
 * table entry -> next table index, never waits for a memory load of the
 * block: the loads of the next windows run beside it.
 *
 * Values are decoded in chunks whose length keeps every window load inside
 * the block (each value advances at most 57 bits on the fast path), so the
 * loop checks one counter per value instead of the position and the count.
 * The block's last bits are decoded from a zero-padded copy; values longer
 * than 57 bits and bad streams take a careful path that reads through
 * bounds-checked helpers and is the only place errors are detected. */
static inline int decoder_run(codec_block_decoder *s, uint64_t *out, size_t cap, uint64_t limit,
                              size_t *n)
{
    const codec_huff_entry *table = s->huff->table;
    const uint8_t *data = s->data;
    const size_t bytes = s->block_bytes;
    const uint64_t end_bits = (uint64_t)bytes * 8;
    /* pos < fast_end  <=>  pos/8 + 12 <= bytes: both window loads (8 bytes
     * at pos/8 and at pos/8 + 4) are inside the block. */
    const uint64_t fast_end = end_bits - 88;
    const uint64_t mask = CODEC_HUFF_TABLE_SIZE - 1;
    uint64_t pos = s->pos;
    uint64_t prev = s->prev;
    uint64_t wrapped = 0;
    size_t want = s->remaining < cap ? (size_t)s->remaining : cap;
    /* The values coded in the bits: all wanted, but an implicit last. */
    size_t todo = want && s->implicit_last && want == s->remaining ? want - 1 : want;
    size_t i = 0;

    *n = 0;
    if (s->raw_first && todo) {
        prev = bitio_read_safe(data, bytes, 0, 64);
        pos = 64;
        out[i++] = prev;
        s->raw_first = 0;
    }
    while (i < todo) {
        if (pos < fast_end) {
            uint64_t win = bitio_peek_fast(data, pos);
            uint64_t win_hi = bitio_peek_fast(data + 4, pos);
            codec_huff_entry e = table[win & mask];
            for (;;) {
                /* Values i .. stop-1 start before fast_end + 57 * k; the
                 * windows of all but the first are loaded below fast_end. */
                size_t stop = i + (size_t)((fast_end - 1 - pos) / BITIO_PEEK_BITS) + 1;
                if (stop > todo)
                    stop = todo;
                for (;;) {
                    unsigned total = CODEC_ENTRY_TOTAL(e);
                    /* Long values and bit patterns that start no code take
                     * the careful path below. */
                    if (SIMS_UNLIKELY(total > BITIO_PEEK_BITS))
                        goto careful;
                    uint64_t v;
                    wrapped |= add_wraps(prev, entry_delta(e, win), &v);
                    out[i++] = v;
                    prev = v;
                    /* Next index: bits [total, total + 11) from pos. `win`
                     * holds them when total <= 46, `win_hi` (32 bits later)
                     * when 47 <= total <= 57: both shifts are computed and
                     * selected without a branch, the counts taken straight
                     * from the entry (its low byte is total). */
                    uint64_t from_lo = win >> (e & 63);
                    uint64_t from_hi = win_hi >> ((e - 32) & 63);
                    uint64_t next =
                        total <= BITIO_PEEK_BITS - CODEC_HUFF_MAX_BITS ? from_lo : from_hi;
                    pos += total;
                    if (SIMS_UNLIKELY((i == stop) | (v > limit))) {
                        if (v > limit)
                            todo = i;
                        break;
                    }
                    win = bitio_peek_fast(data, pos);
                    win_hi = bitio_peek_fast(data + 4, pos);
                    e = table[next & mask];
                }
                if (i >= todo || pos >= fast_end)
                    break;
                win = bitio_peek_fast(data, pos);
                win_hi = bitio_peek_fast(data + 4, pos);
                e = table[win & mask];
            }
            if (i >= todo)
                break;
        }
        if (pos >= fast_end) {
            /* Tail: the block's last 16 bytes copied into a zeroed 32-byte
             * buffer, so single unchecked loads keep working up to the end
             * (bits past the end read as zero; a value reaching into them
             * goes to the careful path, which reports it). */
            uint8_t tail[32] = {0};
            const uint64_t tail_base = end_bits - 128; /* <= fast_end - 40 */
            memcpy(tail, data + bytes - 16, 16);
            uint64_t tpos = pos - tail_base; /* 40 <= tpos <= 128 */
            while (i < todo) {
                uint64_t win = bitio_peek_fast(tail, tpos);
                codec_huff_entry e = table[win & mask];
                unsigned total = CODEC_ENTRY_TOTAL(e);
                if (SIMS_UNLIKELY(total > BITIO_PEEK_BITS || total > 128 - tpos))
                    break;
                uint64_t v;
                wrapped |= add_wraps(prev, entry_delta(e, win), &v);
                out[i++] = v;
                prev = v;
                tpos += total;
                if (v > limit)
                    todo = i;
            }
            pos = tail_base + tpos;
            if (i >= todo)
                break;
        }
    careful:;
        /* One value: a value longer than 57 bits, bits that start no code,
         * or a value running past the block's end. */
        uint64_t win = bitio_peek_safe(data, bytes, pos);
        codec_huff_entry e = table[win & mask];
        unsigned len = CODEC_ENTRY_LEN(e);
        if (SIMS_UNLIKELY(len == 0))
            return SIMS_CORRUPT("no Huffman code matches the bits at bit offset %" PRIu64, pos);
        unsigned j = CODEC_ENTRY_SYM(e) & 63;
        if (SIMS_UNLIKELY(len + j > end_bits - pos))
            return SIMS_CORRUPT("value at bit offset %" PRIu64 " runs past the end of the block "
                                "(%u bits, %" PRIu64 " left)",
                                pos, len + j, end_bits - pos);
        uint64_t mantissa = bitio_read_safe(data, bytes, pos + len, j);
        uint64_t v;
        wrapped |= add_wraps(prev, mantissa | (uint64_t)1 << j, &v);
        out[i++] = v;
        prev = v;
        pos += len + j;
        if (v > limit)
            todo = i;
    }
    if (SIMS_UNLIKELY(wrapped))
        return SIMS_CORRUPT("decoded values overflow 2^64 before bit offset %" PRIu64, pos);
    if (i < want && i == todo && todo + 1 == want && s->implicit_last && want == s->remaining) {
        /* The implicit last value: it must exceed its predecessor (none
         * when it is block 0's only value). */
        if (SIMS_UNLIKELY(!s->raw_first && s->key <= prev))
            return SIMS_CORRUPT("block key %016" PRIx64 " does not exceed the value %016" PRIx64
                                " before it (bit offset %" PRIu64 ")",
                                s->key, prev, pos);
        prev = s->key;
        out[i++] = prev;
        s->raw_first = 0;
    }
    s->pos = pos;
    s->prev = prev;
    s->remaining -= i;
    *n = i;
    return SIMSTORE_OK;
}

int sims_codec_block_decoder_run(codec_block_decoder *s, uint64_t *out, size_t cap, size_t *n)
{
    return decoder_run(s, out, cap, UINT64_MAX, n);
}

int sims_codec_block_decoder_run_to(codec_block_decoder *s, uint64_t *out, size_t cap,
                                    uint64_t limit, size_t *n)
{
    return decoder_run(s, out, cap, limit, n);
}

/* ---- two streams at once ------------------------------------------------- */

/* The values decoder_run would decode from the bits (an implicit last value
 * excluded) when asked for up to cap. */
static size_t coded_todo(const codec_block_decoder *s, size_t cap)
{
    size_t want = s->remaining < cap ? (size_t)s->remaining : cap;
    return want && s->implicit_last && want == s->remaining ? want - 1 : want;
}

/* decoder_run's fast loop for two streams in lock step: each step decodes a
 * value of x's stream, then one of y's, exactly as decoder_run does (see
 * there for the windows and the stop counts); it leaves as soon as either
 * stream needs anything else (a stop count, its limit, the tail, a long
 * value or bad bits), and the single decoder finishes each. */
void sims_codec_block_decoder_run_two(codec_block_run *x, codec_block_run *y)
{
    codec_block_decoder *sa = x->dec, *sb = y->dec;
    const uint64_t mask = CODEC_HUFF_TABLE_SIZE - 1;
    size_t ia = 0, ib = 0;
    int over_a = 0, over_b = 0;
    x->rc = y->rc = SIMSTORE_OK;
    size_t todo_a = coded_todo(sa, x->cap), todo_b = coded_todo(sb, y->cap);
    const uint64_t end_a = (uint64_t)sa->block_bytes * 8 - 88,
                   end_b = (uint64_t)sb->block_bytes * 8 - 88;
    if (!sa->raw_first && !sb->raw_first && todo_a && todo_b && sa->pos < end_a &&
        sb->pos < end_b) {
        const codec_huff_entry *ta = sa->huff->table, *tb = sb->huff->table;
        const uint8_t *da = sa->data, *db = sb->data;
        uint64_t pa = sa->pos, pb = sb->pos, prev_a = sa->prev, prev_b = sb->prev;
        uint64_t wrapped_a = 0, wrapped_b = 0;
        const uint64_t limit_a = x->limit, limit_b = y->limit;
        uint64_t *out_a = x->out, *out_b = y->out;
        /* Fewer live values than decoder_run's loop (two streams must fit
         * the registers): the next entry comes from a load at the new
         * position, which the other stream's work hides. */
        int leave = 0;
        while (!leave) {
            size_t stop_a = ia + (size_t)((end_a - 1 - pa) / BITIO_PEEK_BITS) + 1;
            size_t stop_b = ib + (size_t)((end_b - 1 - pb) / BITIO_PEEK_BITS) + 1;
            stop_a = stop_a < todo_a ? stop_a : todo_a;
            stop_b = stop_b < todo_b ? stop_b : todo_b;
            size_t steps = stop_a - ia < stop_b - ib ? stop_a - ia : stop_b - ib;
            uint64_t wa = bitio_peek_fast(da, pa), wb = bitio_peek_fast(db, pb);
            codec_huff_entry ea = ta[wa & mask], eb = tb[wb & mask];
            for (; steps; steps--) {
                unsigned tot_a = CODEC_ENTRY_TOTAL(ea), tot_b = CODEC_ENTRY_TOTAL(eb);
                if (SIMS_UNLIKELY((tot_a > BITIO_PEEK_BITS) | (tot_b > BITIO_PEEK_BITS))) {
                    leave = 1;
                    break;
                }
                uint64_t va, vb;
                wrapped_a |= add_wraps(prev_a, entry_delta(ea, wa), &va);
                wrapped_b |= add_wraps(prev_b, entry_delta(eb, wb), &vb);
                *out_a++ = prev_a = va;
                *out_b++ = prev_b = vb;
                pa += tot_a;
                pb += tot_b;
                if (SIMS_UNLIKELY((va > limit_a) | (vb > limit_b))) {
                    over_a = va > limit_a;
                    over_b = vb > limit_b;
                    leave = 1;
                    break;
                }
                if (steps > 1) {
                    wa = bitio_peek_fast(da, pa);
                    wb = bitio_peek_fast(db, pb);
                    ea = ta[wa & mask];
                    eb = tb[wb & mask];
                }
            }
            ia = (size_t)(out_a - x->out);
            ib = (size_t)(out_b - y->out);
            if (ia >= todo_a || ib >= todo_b || pa >= end_a || pb >= end_b)
                break;
        }
        sa->pos = pa;
        sa->prev = prev_a;
        sa->remaining -= ia;
        sb->pos = pb;
        sb->prev = prev_b;
        sb->remaining -= ib;
        if (SIMS_UNLIKELY(wrapped_a))
            x->rc = SIMS_CORRUPT("decoded values overflow 2^64 before bit offset %" PRIu64, pa);
        if (SIMS_UNLIKELY(wrapped_b))
            y->rc = SIMS_CORRUPT("decoded values overflow 2^64 before bit offset %" PRIu64, pb);
    }
    /* Each stream on its own from where the loop left it. */
    codec_block_run *run[2] = {x, y};
    size_t done[2] = {ia, ib};
    int over[2] = {over_a, over_b};
    for (int i = 0; i < 2; i++) {
        codec_block_run *r = run[i];
        r->n = done[i];
        if (r->rc || over[i])
            continue;
        size_t m = 0;
        r->rc = decoder_run(r->dec, r->out + done[i], r->cap - done[i], r->limit, &m);
        r->n += m;
    }
}

int sims_codec_block_decoder_finish(const codec_block_decoder *s, uint64_t key)
{
    if (s->remaining)
        return sims_fail(SIMSTORE_EINVAL, "block decoder finished with %" PRIu64 " values left",
                         s->remaining);
    if (s->prev != key)
        return SIMS_CORRUPT("last value %016" PRIx64 " differs from the block key %016" PRIx64,
                            s->prev, key);
    const uint8_t *data = s->data;
    uint64_t pos = s->pos;
    size_t byte = (size_t)(pos >> 3);
    /* pos <= 8 * block_bytes holds: run() never advances past the end. */
    if ((pos & 7) && (data[byte] >> (pos & 7)) != 0)
        return SIMS_CORRUPT("nonzero padding bits after bit offset %" PRIu64, pos);
    for (size_t b = byte + ((pos & 7) ? 1 : 0); b < s->block_bytes; b++)
        if (data[b])
            return SIMS_CORRUPT("nonzero padding byte at byte offset %zu of the block", b);
    return SIMSTORE_OK;
}

static int decode_whole(const codec_huff_decoder *h, const uint8_t *data, size_t block_bytes,
                        int raw_first, uint64_t prev, uint64_t count, uint64_t key, int implicit,
                        uint64_t *out)
{
    codec_block_decoder s;
    sims_codec_block_decoder_init(&s, h, data, block_bytes, raw_first, prev, count);
    if (implicit)
        sims_codec_block_decoder_set_last(&s, key);
    size_t n;
    uint64_t done = 0;
    while (done < count) {
        int rc = sims_codec_block_decoder_run(&s, out + done, (size_t)(count - done), &n);
        if (rc)
            return rc;
        if (n == 0)
            break;
        done += n;
    }
    return sims_codec_block_decoder_finish(&s, key);
}

int sims_codec_block_decode(const codec_huff_decoder *h, const uint8_t *data, size_t block_bytes,
                            int raw_first, uint64_t prev, uint64_t count, uint64_t key,
                            uint64_t *out)
{
    return decode_whole(h, data, block_bytes, raw_first, prev, count, key, 0, out);
}

int sims_codec_block_decode_implicit(const codec_huff_decoder *h, const uint8_t *data,
                                     size_t block_bytes, int raw_first, uint64_t prev,
                                     uint64_t count, uint64_t key, uint64_t *out)
{
    return decode_whole(h, data, block_bytes, raw_first, prev, count, key, 1, out);
}
