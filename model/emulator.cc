// The emulator's kernel: the compressor's policy (model/reference.py, model/lines.py) on
// arrays of beats, compiled by model/emulator.py into a shared library and called through
// ctypes. It makes the models' decisions in the models' order, so that its writes, discards
// and step totals are theirs, write for write; the Python side checks the run-time modes'
// settings and turns errors into the models' messages.
//
// A beat is a line address, `lanes` gradients and a lane mask (one lane: a gradient at its
// address). Events (a flush, one mode setting, an LFSR seed) come in a separate stream, each
// applied before the beat of its position.

#include <cstdint>
#include <cstring>
#include <new>
#include <unordered_map>
#include <vector>

namespace {

// Causes, in the order of model.CAUSES; NONE marks a lane outside a write's mask.
enum : uint8_t { DIRECT = 0, ACCUM_THRESHOLD, MAX_UPDATES, EVICTION, FLUSH, STOCHASTIC, LINE,
                 NONE = 255 };

// Run-time mode settings, in the order of model/emulator.py's _KERNEL_MODES.
enum { SMALL_THRESHOLD = 0, STOCHASTIC_MODE, EMA_ENABLE, EMA_PER_STEP, EMA_SHIFT, EMA_SCALE,
       EMA_MIN, EMA_MAX, BYPASS0_BASE, BYPASS0_LIMIT, BYPASS0_ENABLE, BYPASS1_BASE,
       BYPASS1_LIMIT, BYPASS1_ENABLE, N_MODES };

// Events.
enum { EV_FLUSH = 1, EV_MODE = 2, EV_SEED = 3 };

// Errors (the Python side words them as the models do).
enum { OK = 0, ERR_ADDR = 1, ERR_LINE_ALIGN = 2, ERR_MASK = 3, ERR_GRAD = 4,
       ERR_THRESHOLD = 5, ERR_SEED_NOT_IDLE = 6 };

const uint32_t LFSR_TAPS = 0x80200003u;     // design.params.LFSR_TAPS
const int EMA_SCALE_FRACTION_BITS = 4;      // design.params.EMA_SCALE_FRACTION_BITS
const int EMA_LINE_LAG = 2;                 // design.params.EMA_LINE_LAG

inline uint32_t lfsr_step(uint32_t s) { return (s >> 1) ^ ((s & 1) ? LFSR_TAPS : 0); }
inline int64_t iabs(int64_t v) { return v < 0 ? -v : v; }

// An entry of the unbounded L1 (sets = None): kept in a list in allocation order, which is
// the order of the models' dict, so that a flush writes in the same order.
struct Loose {
    uint64_t line;
    uint32_t held;
    int64_t count;
    int64_t prev, next;
};

struct State {
    int lanes, lane_bits, set_bits, ways;
    bool unbounded;
    bool whole_line;             // the whole-line rule (model.lines, whole_line=True)
    int64_t sets, max_updates, grad_width, grad_min, grad_max, threshold_max;
    uint64_t addr_max;
    int fraction_bits;           // of the EMA: 8 + log2(lanes)
    int random_bits;             // min(grad_width, 32)
    int64_t mode[N_MODES];
    uint32_t lfsr;
    int64_t ema, ema_latched;
    // Lines: the EMA before the last EMA_LINE_LAG updates and after each, oldest first (a beat
    // is judged by the oldest; the RTL forms an update outside the EMA's loop).
    int64_t ema_recent[EMA_LINE_LAG + 1];
    uint32_t discard_count;
    int64_t discard_sum;
    bool clear_discards;
    int64_t valid_count;
    // Bounded L1: entry e = set * ways + way.
    std::vector<uint64_t> tag;
    std::vector<uint8_t> valid;
    std::vector<uint32_t> held;
    std::vector<int64_t> count;
    std::vector<int64_t> sums;   // lanes per entry
    std::vector<int64_t> victim; // per set
    // Unbounded L1.
    std::unordered_map<uint64_t, int64_t> where;   // line -> slot
    std::vector<Loose> loose;
    std::vector<int64_t> loose_sums;               // lanes per slot
    std::vector<int64_t> free_slots;
    int64_t head = -1, tail = -1;
};

}  // namespace

extern "C" {

// The inputs of one call: beats (the line addresses as uint32 or uint64, the gradients as
// int16 or int32, `lanes` per beat, the thresholds as uint16, uint32 or int64, one per beat or
// one for all, the masks or none for every lane) and events (position, kind, a, b).
struct In {
    int64_t n;
    const void *line;
    int64_t line_bytes;          // 4 or 8
    const void *grads;
    int64_t grad_bytes;          // 2, 4 or 8 (8: the models' operations, any int64)
    const void *thr;
    int64_t thr_bytes;           // 2, 4 or 8 (8: signed)
    int64_t thr_stride;          // 0: one threshold for every beat
    const uint32_t *mask;        // null: every lane
    int64_t ne;
    const int64_t *ev_pos, *ev_kind, *ev_a, *ev_b;
};

// The outputs: arrays of the given capacities, filled from nw, nd, ns on. A call stops before
// a beat or an event whose worst case would not fit, with `full` set and `beat`, `event` the
// place to resume from (the caller grows the arrays and calls again), or where an error
// stopped it.
struct Out {
    void *w_line;            // uint32 or uint64 (addr_bytes)
    uint32_t *w_mask;        // null with one lane (the mask is 1)
    void *w_values;          // lanes per write, int32 or int64 (value_bytes)
    uint8_t *w_causes;       // lanes per write
    int64_t nw, w_capacity;
    void *d_addr;            // addr_bytes
    void *d_error;           // value_bytes
    int64_t nd, d_capacity;
    int64_t addr_bytes, value_bytes;   // 4 or 8: the narrower when every value fits
    int64_t *s_count;
    int64_t *s_sum;
    int64_t ns, s_capacity;
    int64_t beat, event, full;
    int64_t error, error_lane;
};

}

namespace {

// The outputs while a call runs: the counters in locals (written back to Out at the end of
// the call), the arrays and their element widths.
struct Sink {
    void *w_line;
    uint32_t *w_mask;
    void *w_values;
    uint8_t *w_causes;
    int64_t nw;
    void *d_addr;
    void *d_error;
    int64_t nd;
    int64_t *s_count;
    int64_t *s_sum;
    int64_t ns;
    bool wide_addr, wide_value;
};

// A line write being made (model.lines._Line): each lane's value and cause, the lanes written.
struct Line {
    int64_t values[32];
    uint8_t causes[32];
    uint32_t mask;
    void clear(int lanes) {
        std::memset(values, 0, sizeof(int64_t) * lanes);
        std::memset(causes, NONE, lanes);
        mask = 0;
    }
    // A lane written twice in a beat is one value, cause DIRECT.
    void add(int lane, int64_t value, uint8_t cause) {
        if (causes[lane] == NONE) {
            values[lane] = value;
            causes[lane] = cause;
            mask |= 1u << lane;
        } else {
            values[lane] += value;
            causes[lane] = DIRECT;
        }
    }
};

// Append a line write (the caller checked that there is room).
template <int FIXED>
inline void emit(Sink &o, int lanes, uint64_t address, const Line &w) {
    const int L = FIXED ? FIXED : lanes;
    const int64_t k = o.nw++;
    if (o.wide_addr) ((uint64_t *)o.w_line)[k] = address;
    else ((uint32_t *)o.w_line)[k] = (uint32_t)address;
    if (o.w_mask) o.w_mask[k] = w.mask;
    if (o.wide_value) {
        int64_t *v = (int64_t *)o.w_values + k * L;
        for (int i = 0; i < L; i++) v[i] = w.values[i];
    } else {
        int32_t *v = (int32_t *)o.w_values + k * L;
        for (int i = 0; i < L; i++) v[i] = (int32_t)w.values[i];
    }
    std::memcpy(o.w_causes + k * L, w.causes, L);
}

inline void discard(Sink &o, uint64_t address, int64_t error) {
    const int64_t k = o.nd++;
    if (o.wide_addr) ((uint64_t *)o.d_addr)[k] = address;
    else ((uint32_t *)o.d_addr)[k] = (uint32_t)address;
    if (o.wide_value) ((int64_t *)o.d_error)[k] = error;
    else ((int32_t *)o.d_error)[k] = (int32_t)error;
}

// The EMA a beat is judged by outside ema_per_step: one lane's EMA, or on lines the EMA before
// the last EMA_LINE_LAG updates.
inline int64_t ema_judged(const State &s) { return s.lanes == 1 ? s.ema : s.ema_recent[0]; }

int64_t ema_threshold(const State &s) {
    int64_t ema = s.mode[EMA_PER_STEP] ? s.ema_latched : ema_judged(s);
    int64_t candidate = (ema * s.mode[EMA_SCALE]) >> (s.fraction_bits + EMA_SCALE_FRACTION_BITS);
    if (candidate > s.mode[EMA_MAX]) return s.mode[EMA_MAX];
    if (candidate < s.mode[EMA_MIN]) return s.mode[EMA_MIN];
    return candidate;
}

inline bool in_window(const State &s, uint64_t addr) {
    return (s.mode[BYPASS0_ENABLE] && (uint64_t)s.mode[BYPASS0_BASE] <= addr &&
            addr <= (uint64_t)s.mode[BYPASS0_LIMIT]) ||
           (s.mode[BYPASS1_ENABLE] && (uint64_t)s.mode[BYPASS1_BASE] <= addr &&
            addr <= (uint64_t)s.mode[BYPASS1_LIMIT]);
}

// The held lanes of an entry as one line write (cause EVICTION or FLUSH).
inline void held_line(Line &w, int lanes, uint32_t held, const int64_t *sums, uint8_t cause) {
    w.clear(lanes);
    for (uint32_t h = held; h; h &= h - 1) {
        int i = __builtin_ctz(h);
        w.add(i, sums[i], cause);
    }
}

void end_step(State &s, Sink &o) {
    s.ema_latched = s.ema;
    o.s_count[o.ns] = s.discard_count;
    o.s_sum[o.ns] = s.discard_sum;
    o.ns++;
    s.clear_discards = true;
}

void flush(State &s, Sink &o) {
    end_step(s, o);
    const int L = s.lanes;
    Line w;
    if (s.unbounded) {
        for (int64_t k = s.head; k >= 0; k = s.loose[k].next) {
            held_line(w, L, s.loose[k].held, &s.loose_sums[k * L], FLUSH);
            emit<0>(o, L, s.loose[k].line, w);
            s.free_slots.push_back(k);
        }
        s.where.clear();
        s.head = s.tail = -1;
        s.valid_count = 0;
        return;
    }
    if (!s.valid_count) return;
    const int64_t entries = s.sets * s.ways;
    for (int64_t e = 0; e < entries; e++) {
        if (!s.valid[e]) continue;
        uint64_t number = (s.tag[e] << s.set_bits) | (uint64_t)(e / s.ways);
        held_line(w, L, s.held[e], &s.sums[e * L], FLUSH);
        emit<0>(o, L, number << s.lane_bits, w);
        s.valid[e] = 0;
    }
    s.valid_count = 0;
}

// The entry of a line: its held lanes, count and sums (null on a miss), and where it lies
// (the slot of the unbounded L1, or the entry, set and tag of the bounded one).
struct Found {
    uint32_t *held = nullptr;
    int64_t *count = nullptr, *sums = nullptr;
    int64_t entry = -1, slot = -1, set = 0;
    uint64_t tag = 0;
};

Found find(State &s, uint64_t line) {
    const int L = s.lanes;
    Found f;
    if (s.unbounded) {
        auto it = s.where.find(line);
        if (it != s.where.end()) {
            f.slot = it->second;
            f.held = &s.loose[f.slot].held;
            f.count = &s.loose[f.slot].count;
            f.sums = &s.loose_sums[f.slot * L];
        }
        return f;
    }
    const uint64_t number = line >> s.lane_bits;
    f.set = (int64_t)(number & (uint64_t)(s.sets - 1));
    f.tag = number >> s.set_bits;
    const int64_t base = f.set * s.ways;
    for (int w = 0; w < s.ways; w++)
        if (s.valid[base + w] && s.tag[base + w] == f.tag) { f.entry = base + w; break; }
    if (f.entry >= 0) {
        f.held = &s.held[f.entry];
        f.count = &s.count[f.entry];
        f.sums = &s.sums[f.entry * L];
    }
    return f;
}

// Free the line found at f.
void free_line(State &s, const Found &f, uint64_t line) {
    if (s.unbounded) {
        Loose &x = s.loose[f.slot];
        if (x.prev >= 0) s.loose[x.prev].next = x.next; else s.head = x.next;
        if (x.next >= 0) s.loose[x.next].prev = x.prev; else s.tail = x.prev;
        s.where.erase(line);
        s.free_slots.push_back(f.slot);
    } else {
        s.valid[f.entry] = 0;
    }
    s.valid_count--;
}

// Allocate the line that missed (f from find) with the lanes `kept` holding their gradients:
// a free way (the lowest), else the set's round-robin victim, whose held lanes become the
// line write `victim` at `victim_line`. Returns whether there is a victim.
bool allocate(State &s, const Found &f, uint64_t line, uint32_t kept, const int32_t *g,
              Line &victim, uint64_t &victim_line) {
    const int L = s.lanes;
    if (s.unbounded) {
        int64_t k;
        if (!s.free_slots.empty()) {
            k = s.free_slots.back();
            s.free_slots.pop_back();
        } else {
            k = (int64_t)s.loose.size();
            s.loose.push_back(Loose{});
            s.loose_sums.resize(s.loose_sums.size() + L);
        }
        Loose &x = s.loose[k];
        x.line = line;
        x.held = kept;
        x.count = 1;
        x.prev = s.tail;
        x.next = -1;
        if (s.tail >= 0) s.loose[s.tail].next = k; else s.head = k;
        s.tail = k;
        int64_t *ks = &s.loose_sums[k * L];
        for (int i = 0; i < L; i++) ks[i] = (kept >> i & 1) ? g[i] : 0;
        s.where.emplace(line, k);
        s.valid_count++;
        return false;
    }
    const int64_t base = f.set * s.ways;
    int64_t e = -1;
    bool evicts = false;
    for (int w = 0; w < s.ways; w++)
        if (!s.valid[base + w]) { e = base + w; break; }
    if (e < 0) {   // a full set: the round-robin victim leaves
        e = base + s.victim[f.set];
        victim_line = ((s.tag[e] << s.set_bits) | (uint64_t)f.set) << s.lane_bits;
        held_line(victim, L, s.held[e], &s.sums[e * L], EVICTION);
        evicts = true;
        s.victim[f.set] = (s.victim[f.set] + 1) % s.ways;
    } else {
        s.valid_count++;
    }
    s.valid[e] = 1;
    s.tag[e] = f.tag;
    s.held[e] = kept;
    s.count[e] = 1;
    int64_t *es = &s.sums[e * L];
    for (int i = 0; i < L; i++) es[i] = (kept >> i & 1) ? g[i] : 0;
    return evicts;
}

// The tiny lanes of a miss, dropped or rounded to sign(g) * level on one draw of the random
// bits (written into `own` as STOCHASTIC), each accounted as a discard.
inline void tiny_miss(State &s, Sink &o, uint64_t line, const int32_t *g, uint32_t tiny,
                      int64_t level, Line &own) {
    const bool stochastic = s.mode[STOCHASTIC_MODE] != 0;
    const uint64_t random = s.random_bits >= 32 ? s.lfsr
        : (s.lfsr & ((1u << s.random_bits) - 1));
    for (uint32_t m = tiny; m; m &= m - 1) {
        int i = __builtin_ctz(m);
        int64_t written = 0;
        if (stochastic &&
            random * (uint64_t)level < ((uint64_t)iabs(g[i]) << s.random_bits)) {
            written = g[i] > 0 ? level : -level;
            own.add(i, written, STOCHASTIC);
        }
        discard(o, line + i, g[i] - written);
        s.discard_count += 1;
        s.discard_sum += g[i] - written;
    }
}

// One beat under the whole-line rule (model.lines.LineModel._whole_line; with one lane,
// model.reference.ReferenceModel._write_whole_line): a beat writes its line, carrying every
// pending value of it, or allocates it; every value fits grad_width bits.
template <int FIXED>
inline int whole_line_beat(State &s, uint64_t line, const int32_t *g, uint32_t mask,
                           uint32_t bypass, int64_t judged, Sink &o) {
    const int L = FIXED ? FIXED : s.lanes;
    uint32_t direct = 0;
    for (uint32_t m = mask; m; m &= m - 1) {
        int i = __builtin_ctz(m);
        if (iabs(g[i]) >= ((bypass >> i & 1) ? 0 : judged)) direct |= 1u << i;
    }
    const uint32_t small = mask & ~direct;
    Found f = find(s, line);
    Line own;
    own.clear(L);
    if (f.held) {
        int64_t *sums = f.sums;           // 0 where a lane holds nothing
        uint32_t unfit = 0, crossed = 0;  // lanes whose sum and gradient would not fit
        for (uint32_t m = mask; m; m &= m - 1) {
            int i = __builtin_ctz(m);
            const int64_t total = sums[i] + g[i];
            if (total < s.grad_min || total > s.grad_max) unfit |= 1u << i;
            else if ((small >> i & 1) && iabs(total) >= judged) crossed |= 1u << i;
        }
        crossed |= unfit & small;
        const bool fills = *f.count + 1 >= s.max_updates;
        if (!direct && !crossed && !fills) {
            for (uint32_t m = small; m; m &= m - 1) {
                int i = __builtin_ctz(m);
                sums[i] += g[i];
            }
            *f.held |= small;
            *f.count += 1;
            return OK;
        }
        uint32_t left = 0;
        for (uint32_t m = *f.held | mask; m; m &= m - 1) {
            int i = __builtin_ctz(m);
            const uint32_t bit = 1u << i;
            const int64_t in = (mask & bit) ? g[i] : 0;
            if (unfit & direct & bit) {          // the gradient alone; the held sum stays
                own.add(i, g[i], DIRECT);
                left |= bit;
            } else if (unfit & bit) {            // the held sum; the gradient stays
                own.add(i, sums[i], ACCUM_THRESHOLD);
                sums[i] = g[i];
                left |= bit;
            } else {
                own.add(i, sums[i] + in, (direct & bit) ? DIRECT : (crossed & bit) ?
                        ACCUM_THRESHOLD : fills ? MAX_UPDATES : LINE);
            }
        }
        for (int i = 0; i < L; i++)
            if (!(left >> i & 1)) sums[i] = 0;
        if (left) {
            *f.held = left;
            *f.count = 1;
        } else {
            free_line(s, f, line);
        }
        emit<FIXED>(o, L, line, own);
        return OK;
    }
    uint32_t tiny = 0;
    for (uint32_t m = small; m; m &= m - 1) {
        int i = __builtin_ctz(m);
        if (iabs(g[i]) < s.mode[SMALL_THRESHOLD]) tiny |= 1u << i;
    }
    uint32_t kept = small & ~tiny;
    if (direct || (kept && s.max_updates == 1)) {   // written as it came
        for (uint32_t m = mask; m; m &= m - 1) {
            int i = __builtin_ctz(m);
            own.add(i, g[i], (direct >> i & 1) ? DIRECT :
                    ((kept >> i & 1) && s.max_updates == 1) ? MAX_UPDATES : LINE);
        }
    } else if (tiny) {
        const int64_t level = s.mode[SMALL_THRESHOLD] < s.grad_max ? s.mode[SMALL_THRESHOLD]
                                                                   : s.grad_max;
        tiny_miss(s, o, line, g, tiny, level, own);
        if (own.mask) {                   // a rounded lane writes the line: the kept ride
            for (uint32_t m = kept; m; m &= m - 1) {
                int i = __builtin_ctz(m);
                own.add(i, g[i], LINE);
            }
            kept = 0;
        }
    }
    if (tiny && s.mode[STOCHASTIC_MODE]) s.lfsr = lfsr_step(s.lfsr);
    if (own.mask) {
        emit<FIXED>(o, L, line, own);
    } else if (kept) {
        Line victim;
        uint64_t victim_line = 0;
        if (allocate(s, f, line, kept, g, victim, victim_line))
            emit<FIXED>(o, L, victim_line, victim);
    }
    return OK;
}

// One beat, the lanes a compile-time constant where it is one of the designs' (0: any).
template <int FIXED>
inline __attribute__((always_inline))
int beat(State &s, uint64_t line, const int32_t *g, uint32_t mask, int64_t threshold, Sink &o,
         int64_t &lane_of_error) {
    const int L = FIXED ? FIXED : s.lanes;
    // The models' checks, in their order (model.lines.LineModel._check_beat,
    // ReferenceModel.write); lane_of_error >= 0 on entry: that lane's gradient did not fit.
    if (line > s.addr_max) return ERR_ADDR;
    if (line & (uint64_t)(L - 1)) return ERR_LINE_ALIGN;
    if (L < 32 && ((uint64_t)mask >> L)) return ERR_MASK;
    if (lane_of_error >= 0) return ERR_GRAD;
    for (uint32_t m = mask; m; m &= m - 1) {
        int i = __builtin_ctz(m);
        if (g[i] < s.grad_min || g[i] > s.grad_max) { lane_of_error = i; return ERR_GRAD; }
    }
    if (threshold < 0 || threshold > s.threshold_max) return ERR_THRESHOLD;
    if (!mask) return OK;
    if (s.clear_discards) {          // the first input after a flush clears the step's totals
        s.discard_count = 0;
        s.discard_sum = 0;
        s.clear_discards = false;
    }
    const int64_t judged = s.mode[EMA_ENABLE] ? ema_threshold(s) : threshold;
    uint32_t bypass = 0;
    if (s.mode[BYPASS0_ENABLE] | s.mode[BYPASS1_ENABLE])
        for (uint32_t m = mask; m; m &= m - 1) {
            int i = __builtin_ctz(m);
            if (in_window(s, line + i)) bypass |= 1u << i;
        }
    // The EMA: one update by the beat's lanes outside the windows, each weighing 1 / lanes.
    uint32_t sampled = mask & ~bypass;
    if (sampled) {
        int64_t total = 0;
        for (uint32_t m = sampled; m; m &= m - 1) total += iabs(g[__builtin_ctz(m)]);
        int64_t diff = (total << s.fraction_bits) - (int64_t)__builtin_popcount(sampled) * s.ema;
        s.ema += diff >> (s.mode[EMA_SHIFT] + s.lane_bits);   // floor, as an arithmetic shift
        for (int k = 0; k < EMA_LINE_LAG; k++) s.ema_recent[k] = s.ema_recent[k + 1];
        s.ema_recent[EMA_LINE_LAG] = s.ema;
    }
    if (s.whole_line) return whole_line_beat<FIXED>(s, line, g, mask, bypass, judged, o);
    Line own, victim;
    own.clear(L);
    uint64_t victim_line = 0;
    uint32_t small = 0;
    for (uint32_t m = mask; m; m &= m - 1) {
        int i = __builtin_ctz(m);
        int64_t t = (bypass >> i & 1) ? 0 : judged;
        if (iabs(g[i]) >= t) own.add(i, g[i], DIRECT);
        else small |= 1u << i;
    }
    bool victim_written = false;
    if (small) {
        Found f = find(s, line);
        uint32_t *held = f.held;
        int64_t *count = f.count, *sums = f.sums;
        if (held) {
            // A hit: the small lanes add, the beat is one update of the line.
            for (uint32_t m = small; m; m &= m - 1) {
                int i = __builtin_ctz(m);
                sums[i] += g[i];
            }
            *held |= small;
            *count += 1;
            for (uint32_t m = small; m; m &= m - 1) {
                int i = __builtin_ctz(m);
                if (iabs(sums[i]) >= judged) {
                    own.add(i, sums[i], ACCUM_THRESHOLD);
                    sums[i] = 0;
                    *held &= ~(1u << i);
                }
            }
            if (*held && *count >= s.max_updates) {
                for (uint32_t h = *held; h; h &= h - 1) {
                    int i = __builtin_ctz(h);
                    own.add(i, sums[i], MAX_UPDATES);
                }
                *held = 0;
            }
            if (!*held) free_line(s, f, line);
        } else {
            // A miss: tiny lanes are dropped or rounded, on one draw of the random bits.
            uint32_t tiny = 0;
            for (uint32_t m = small; m; m &= m - 1) {
                int i = __builtin_ctz(m);
                if (iabs(g[i]) < s.mode[SMALL_THRESHOLD]) tiny |= 1u << i;
            }
            const uint32_t kept = small & ~tiny;
            if (tiny) {
                tiny_miss(s, o, line, g, tiny, s.mode[SMALL_THRESHOLD], own);
                if (s.mode[STOCHASTIC_MODE]) s.lfsr = lfsr_step(s.lfsr);
            }
            if (kept) {
                if (s.max_updates == 1) {
                    for (uint32_t m = kept; m; m &= m - 1) {
                        int i = __builtin_ctz(m);
                        own.add(i, g[i], MAX_UPDATES);
                    }
                } else {
                    victim_written = allocate(s, f, line, kept, g, victim, victim_line);
                }
            }
        }
    }
    // The beat's own line write first, then the victim's.
    if (own.mask) emit<FIXED>(o, L, line, own);
    if (victim_written) emit<FIXED>(o, L, victim_line, victim);
    return OK;
}

template <int FIXED>
void run_into(State &s, const In &in, Sink &o, Out &out) {
    const int L = FIXED ? FIXED : s.lanes;
    const uint32_t all = L == 32 ? 0xffffffffu : ((1u << L) - 1);
    int64_t e = out.event;
    int32_t wide[32];
    for (int64_t i = out.beat; i <= in.n; i++) {
        for (; e < in.ne && in.ev_pos[e] == i; e++) {
            switch (in.ev_kind[e]) {
            case EV_FLUSH:
                if (o.nw + s.valid_count > out.w_capacity || o.ns + 1 > out.s_capacity) {
                    out.full = 1;
                    out.beat = i;
                    out.event = e;
                    return;
                }
                flush(s, o);
                break;
            case EV_MODE:
                if (in.ev_a[e] >= 0 && in.ev_a[e] < N_MODES) s.mode[in.ev_a[e]] = in.ev_b[e];
                break;
            case EV_SEED:
                if (s.valid_count) {
                    out.error = ERR_SEED_NOT_IDLE;
                    out.beat = i;
                    out.event = e;
                    return;
                }
                s.lfsr = in.ev_a[e] ? (uint32_t)in.ev_a[e] : 1u;
                break;
            }
        }
        if (i == in.n) {
            out.beat = i;
            out.event = e;
            break;
        }
        // A beat writes its own line and a victim's and discards at most every lane.
        if (o.nw + 2 > out.w_capacity || o.nd + L > out.d_capacity) {
            out.full = 1;
            out.beat = i;
            out.event = e;
            return;
        }
        const uint64_t line = in.line_bytes == 4 ? ((const uint32_t *)in.line)[i]
                                                 : ((const uint64_t *)in.line)[i];
        const uint32_t beat_mask = in.mask ? in.mask[i] : all;
        int64_t lane = -1;
        const int32_t *g;
        if (in.grad_bytes == 2) {
            const int16_t *narrow = (const int16_t *)in.grads + i * L;
            for (int k = 0; k < L; k++) wide[k] = narrow[k];
            g = wide;
        } else if (in.grad_bytes == 8) {
            // Checked here, where a value outside int32 is still itself; beat() reports it
            // in the models' order of checks.
            const int64_t *w64 = (const int64_t *)in.grads + i * L;
            for (int k = L - 1; k >= 0; k--) {
                if ((beat_mask >> k & 1) && (w64[k] < s.grad_min || w64[k] > s.grad_max))
                    lane = k;
                wide[k] = (int32_t)w64[k];
            }
            g = wide;
        } else {
            g = (const int32_t *)in.grads + i * L;
        }
        const int64_t t = in.thr_stride * i;
        const int64_t threshold = in.thr_bytes == 2 ? ((const uint16_t *)in.thr)[t]
            : in.thr_bytes == 4 ? ((const uint32_t *)in.thr)[t] : ((const int64_t *)in.thr)[t];
        int err = beat<FIXED>(s, line, g, beat_mask, threshold, o, lane);
        if (err) {
            out.error = err;
            out.beat = i;
            out.event = e;
            out.error_lane = lane;
            return;
        }
    }
}

template <int FIXED>
void run(State &s, const In &in, Out &out) {
    Sink o{out.w_line, out.w_mask, out.w_values, out.w_causes, out.nw,
           out.d_addr, out.d_error, out.nd, out.s_count, out.s_sum, out.ns,
           out.addr_bytes == 8, out.value_bytes == 8};
    out.full = 0;
    run_into<FIXED>(s, in, o, out);
    out.nw = o.nw;
    out.nd = o.nd;
    out.ns = o.ns;
}

}  // namespace

extern "C" {

// A new state, or nullptr if L1 does not fit in memory (no C++ exception crosses into Python,
// where it would abort the process).
void *gc_new(int64_t lanes, int64_t sets, int64_t ways, int64_t max_updates,
             int64_t grad_width, int64_t addr_width, int64_t whole_line) try {
    State *s = new State();
    s->lanes = (int)lanes;
    s->whole_line = whole_line != 0;
    s->lane_bits = __builtin_ctzll((uint64_t)lanes);
    s->unbounded = sets == 0;
    s->sets = s->unbounded ? 0 : sets;
    s->ways = s->unbounded ? 0 : (int)ways;
    s->set_bits = s->unbounded ? 0 : __builtin_ctzll((uint64_t)sets);
    s->max_updates = max_updates;
    s->grad_width = grad_width;
    s->grad_min = -(int64_t(1) << (grad_width - 1));
    s->grad_max = (int64_t(1) << (grad_width - 1)) - 1;
    s->threshold_max = (int64_t(1) << grad_width) - 1;
    s->addr_max = addr_width >= 64 ? ~uint64_t(0) : (uint64_t(1) << addr_width) - 1;
    s->fraction_bits = 8 + s->lane_bits;
    s->random_bits = grad_width < 32 ? (int)grad_width : 32;
    std::memset(s->mode, 0, sizeof s->mode);
    s->lfsr = 1;
    s->ema = s->ema_latched = 0;
    for (int64_t &e : s->ema_recent) e = 0;
    s->discard_count = 0;
    s->discard_sum = 0;
    s->clear_discards = false;
    s->valid_count = 0;
    if (!s->unbounded) {
        int64_t entries = sets * ways;
        s->tag.assign(entries, 0);
        s->valid.assign(entries, 0);
        s->held.assign(entries, 0);
        s->count.assign(entries, 0);
        s->sums.assign(entries * lanes, 0);
        s->victim.assign(sets, 0);
    }
    return s;
} catch (const std::bad_alloc &) {
    return nullptr;
}

void gc_free(void *p) { delete static_cast<State *>(p); }

int64_t gc_run(void *p, const In *in, Out *o) {
    State &s = *static_cast<State *>(p);
    switch (s.lanes) {
    case 1: run<1>(s, *in, *o); break;
    case 2: run<2>(s, *in, *o); break;
    case 4: run<4>(s, *in, *o); break;
    case 8: run<8>(s, *in, *o); break;
    case 16: run<16>(s, *in, *o); break;
    case 32: run<32>(s, *in, *o); break;
    default: run<0>(s, *in, *o); break;
    }
    return o->error;
}

// Scalars of the state, by number (model/emulator.py's _FIELDS).
int64_t gc_get(void *p, int64_t what) {
    const State &s = *static_cast<State *>(p);
    switch (what) {
    case 0: return s.lfsr;
    case 1: return s.ema;
    case 2: return s.ema_latched;
    case 3: return s.discard_count;
    case 4: return s.discard_sum;
    case 5: return s.valid_count;
    case 6: return ema_threshold(s);
    case 7: return s.clear_discards;
    case 8: return ema_judged(s);
    }
    return 0;
}

int64_t gc_get_mode(void *p, int64_t index) {
    const State &s = *static_cast<State *>(p);
    return index >= 0 && index < N_MODES ? s.mode[index] : 0;
}

// The lines held, in the order a flush writes them: line, held lanes, sums (lanes each).
// Returns how many; fills at most `capacity`.
int64_t gc_held(void *p, int64_t capacity, uint64_t *line, uint32_t *held, int64_t *sums) {
    const State &s = *static_cast<State *>(p);
    const int L = s.lanes;
    int64_t k = 0;
    if (s.unbounded) {
        for (int64_t x = s.head; x >= 0 && k < capacity; x = s.loose[x].next, k++) {
            line[k] = s.loose[x].line;
            held[k] = s.loose[x].held;
            std::memcpy(sums + k * L, &s.loose_sums[x * L], sizeof(int64_t) * L);
        }
        return k;
    }
    for (int64_t e = 0; e < s.sets * s.ways && k < capacity; e++) {
        if (!s.valid[e]) continue;
        line[k] = ((s.tag[e] << s.set_bits) | (uint64_t)(e / s.ways)) << s.lane_bits;
        held[k] = s.held[e];
        std::memcpy(sums + k * L, &s.sums[e * L], sizeof(int64_t) * L);
        k++;
    }
    return k;
}

}
