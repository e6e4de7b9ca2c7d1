// Compiled (Yosys CXXRTL) driver for design.GradientCompressor.
//
// Built by simulation/cxxrtl.py, which includes this file after the generated design
// (`#include CXXRTL_DESIGN`) and defines the configuration macros:
//   GC_ADDR_WIDTH, GC_GRAD_WIDTH,  port widths (payload field offsets follow the layouts;
//   GC_VALUE_WIDTH                 a DRAM value's width: grad_width + 2, or grad_width
//                                  under the whole-line rule, design.layouts.line_value_width:
//                                  grad_in payload = addr | grad << addr_width,
//                                  dram_out payload = addr | value << addr_width)
//   GC_LANES                       1, or the lanes of a line (design.layouts.line_layout,
//                                  line_dram_layout, fields in order from bit 0):
//                                  grad_in payload = addr | grads[i] << (addr_width +
//                                  i * grad_width) | mask << (addr_width + lanes * grad_width),
//                                  dram_out payload = addr | values[i] << (addr_width +
//                                  i * value_width) | mask << (addr_width + lanes * value_width),
//                                  discard and bypassed one bit per lane, discard_error one
//                                  grad_width + 1-bit field per lane (lane 0 lowest)
//   GC_THRESHOLD_DELAY             the design's CURRENT_THRESHOLD_DELAY: current_threshold
//                                  shows the threshold of an acceptance in cycle c in cycle
//                                  c + GC_THRESHOLD_DELAY (the pipelined design: 3)
//   GC_SINGLE_DELTA                1 if the generated eval() always converges in one delta
//                                  cycle (no `converged = false` in it): then a cycle costs
//                                  one eval instead of two
// and writes `modes.inc` beside it: `set_mode_input(top, index, value)`, which sets the
// run-time mode input number `index` (in the order of design.params.MODES_OFF).
//
// It follows simulation/driver.py's `simulate` exactly, cycle for cycle (on lines too:
// a beat is offered and recorded as driver.py does, a DRAM line write is recorded as one
// write per lane in its mask, a discard as one per lane set in `discard`):
// every cycle ("tick") the inputs are set, the design is settled (clock low), outputs are
// sampled, then the clock rises. See driver.py for the protocol.
//
// Usage: sim OPS OUT DRAM_MODE SEED PROBABILITY MAX_STALL IDLE_HOLD FLUSH_TIMEOUT MAX_CYCLES PATTERN
//            VCD VCD_CYCLES
//   OPS   binary operations file, little-endian, in columns (see struct Ops):
//         int64 n_ops, n_grads, gap_mode (0 none, 1 constant, 2 one per gradient), gap,
//         n_settings; uint8 kind[n_ops] (0 gradient, 1 flush, 2 set a mode input, 3 load the
//         LFSR seed), padded to 8 bytes; int64 addr[n_grads], grad[n_grads],
//         threshold[n_grads]; with gap_mode 2, int64 gaps[n_grads] (idle cycles before each
//         gradient); int64 setting_input[n_settings], setting_value[n_settings] (one per kind
//         2 or 3, in order; kind 3 ignores the input). Gradient values are truncated to the
//         port widths, as the Amaranth simulator does; mode values are checked by the caller.
//         On lines (GC_LANES > 1) kind 0 is a beat, grad holds n_grads * GC_LANES values (beat
//         by beat, lane 0 first), and an int64 mask[n_grads] column follows threshold (before
//         the gaps).
//   OUT   binary results file (see write_results), written on success.
//   DRAM_MODE 0 always, 1 every_other, 2 random(seed, probability, max_stall), 3 periodic PATTERN
//   MAX_STALL, MAX_CYCLES: -1 for none. PATTERN: "-" unless DRAM_MODE is 3.
//   VCD   "-", or a VCD file to write the first VCD_CYCLES cycles to, through CXXRTL's own
//         writer (cxxrtl_vcd.h): each cycle is sampled settled with the clock low (time
//         10 * cycle ns), then after the rising edge (time 10 * cycle + 5 ns). Writing a VCD
//         runs every cycle through the general settle() path, even with GC_SINGLE_DELTA.
// On a protocol failure (DRAM stream rule, flush timeout, max cycles) the message goes to
// stderr prefixed "ASSERTION: " and the exit status is 3.
// Progress: with the environment variable GC_PROGRESS_EVERY=N (N > 0), a line
// "progress K" (K operations done) goes to stdout after every N operations, for a progress bar.

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include CXXRTL_DESIGN
#include <cxxrtl/cxxrtl_vcd.h>
#include "modes.inc"

#ifndef GC_ADDR_WIDTH
#error "GC_ADDR_WIDTH must be defined"
#endif
#ifndef GC_GRAD_WIDTH
#error "GC_GRAD_WIDTH must be defined"
#endif
#ifndef GC_VALUE_WIDTH
#error "GC_VALUE_WIDTH must be defined"
#endif
#ifndef GC_SINGLE_DELTA
#define GC_SINGLE_DELTA 0
#endif
#ifndef GC_THRESHOLD_DELAY
#define GC_THRESHOLD_DELAY 1
#endif
static_assert(GC_THRESHOLD_DELAY >= 1, "current_threshold is a register: its delay is at least 1");

#ifndef GC_LANES
#define GC_LANES 1
#endif
static_assert(GC_LANES >= 1 && GC_LANES <= 32, "lanes are 1 to 32");

static_assert(GC_ADDR_WIDTH <= 64, "addr_width above 64 is not supported by the compiled driver");
static_assert(GC_GRAD_WIDTH + 2 <= 64, "grad_width above 62 is not supported by the compiled driver");
static_assert(GC_VALUE_WIDTH >= GC_GRAD_WIDTH && GC_VALUE_WIDTH <= GC_GRAD_WIDTH + 2,
              "a DRAM value is grad_width to grad_width + 2 bits");

static const size_t ADDR_W  = GC_ADDR_WIDTH;
static const size_t GRAD_W  = GC_GRAD_WIDTH;
static const size_t VALUE_W = GC_VALUE_WIDTH;
static const size_t LANES   = GC_LANES;
// The mask fields of a line (unused with one lane).
static const size_t IN_MASK_AT   = ADDR_W + LANES * GRAD_W;
static const size_t DRAM_MASK_AT = ADDR_W + LANES * VALUE_W;

static inline uint64_t mask_of(size_t width) {
	return width >= 64 ? ~uint64_t(0) : ((uint64_t(1) << width) - 1);
}

static inline int64_t sext(uint64_t v, size_t width) {
	if (width >= 64)
		return (int64_t)v;
	uint64_t sign = uint64_t(1) << (width - 1);
	v &= mask_of(width);
	return (int64_t)((v ^ sign) - sign);
}

// Bit-field access on a CXXRTL value (32-bit chunks); offset + width <= Bits, width <= 64, at
// any offset (a field spans at most 3 chunks: offset % 32 + 64 <= 96 bits), so the lanes of a
// wide line payload (576 bits at 32 lanes of 16 bits) are read and set field by field.
template<size_t Bits>
static uint64_t get_field(const cxxrtl::value<Bits> &v, size_t offset, size_t width) {
	typedef cxxrtl::value<Bits> V;
	unsigned __int128 acc = 0;
	size_t first = offset / 32, shift = offset % 32;
	for (size_t k = 0; k < 3 && first + k < V::chunks; k++)
		acc |= (unsigned __int128)v.data[first + k] << (32 * k);
	return (uint64_t)(acc >> shift) & mask_of(width);
}

// A port driven by a flip-flop is a CXXRTL wire: read its current value.
template<size_t Bits>
static uint64_t get_field(const cxxrtl::wire<Bits> &w, size_t offset, size_t width) {
	return get_field(w.curr, offset, width);
}

template<size_t Bits>
static void set_field(cxxrtl::value<Bits> &v, size_t offset, size_t width, uint64_t field) {
	typedef cxxrtl::value<Bits> V;
	size_t first = offset / 32, shift = offset % 32;
	unsigned __int128 m = (unsigned __int128)mask_of(width) << shift;
	unsigned __int128 f = (unsigned __int128)(field & mask_of(width)) << shift;
	for (size_t k = 0; k < 3 && first + k < V::chunks; k++) {
		uint32_t cm = (uint32_t)(m >> (32 * k));
		uint32_t cf = (uint32_t)(f >> (32 * k));
		v.data[first + k] = (v.data[first + k] & ~cm) | cf;
	}
}

// The DRAM ready generator shared with simulation/driver.py (`random_ready`): SplitMix64,
// and `next_double` = top 53 bits / 2**53, compared with `probability` as Python does.
struct SplitMix64 {
	uint64_t state;
	uint64_t next() {
		state += 0x9E3779B97F4A7C15ull;
		uint64_t z = state;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		return z ^ (z >> 31);
	}
	double next_double() {
		return (double)(next() >> 11) * (1.0 / 9007199254740992.0);
	}
};

struct DramReady {
	int mode;
	SplitMix64 rng;
	double probability;
	int64_t max_stall;
	int64_t stalled = 0;
	std::string pattern;

	bool operator()(uint64_t cycle) {
		switch (mode) {
		case 0:
			return true;
		case 1:
			return cycle % 2 == 0;
		case 2:
			if ((max_stall >= 0 && stalled >= max_stall) || rng.next_double() < probability) {
				stalled = 0;
				return true;
			}
			stalled++;
			return false;
		default:
			return pattern[cycle % pattern.size()] == '1';
		}
	}
};

struct Failure {
	std::string message;
};

struct Results {
	// On lines accepted_grad holds GC_LANES values per beat, accepted_mask one mask per beat,
	// and write_addr / write_value one entry per lane written (write_cycles one per line write).
	std::vector<int64_t> accepted_addr, accepted_grad, accepted_threshold, accept_cycles;
	std::vector<int64_t> accepted_mask;
	std::vector<int64_t> write_addr, write_value, write_cycles;
	std::vector<uint8_t> causes;         // index into model.CAUSES
	std::vector<int64_t> flush_cycles;
	std::vector<int64_t> accept_thresholds;               // current_threshold GC_THRESHOLD_DELAY cycles later
	std::vector<int64_t> discard_addr, discard_error;     // accounted discards, in order
	std::vector<int64_t> step_discard_count, step_discard_sum;   // at each completed flush
	int64_t bypassed = 0;
	int64_t input_stall_cycles = 0;
	int64_t dram_stall_cycles = 0;
	int64_t hits = 0;
	int64_t misses = 0;
	int64_t cycles = 0;
};

// The optional waveform: the design's debug items (ports, registers, named wires; not the
// memories' contents, which would dwarf the rest) sampled into a VCD file.
struct Waves {
	cxxrtl::debug_items items;
	cxxrtl::vcd_writer writer;
	FILE *file = nullptr;
	int64_t cycles = 0;   // cycles to write

	bool open(const char *path, int64_t n_cycles, cxxrtl_design::p_top &top) {
		file = fopen(path, "w");
		if (!file)
			return false;
		cycles = n_cycles;
		top.debug_info(&items, /*scopes=*/nullptr, "top ");
		writer.timescale(1, "ns");
		writer.add_without_memories(items);
		return true;
	}

	void sample(uint64_t time) {
		writer.sample(time);
		fwrite(writer.buffer.data(), 1, writer.buffer.size(), file);
		writer.buffer.clear();
	}

	void close() {
		if (file)
			fclose(file);
		file = nullptr;
	}
};

struct Ops {
	int64_t n_ops = 0, n_grads = 0, gap_mode = 0, gap = 0, n_settings = 0;
	const uint8_t *kind = nullptr;
	const int64_t *addr = nullptr, *grad = nullptr, *threshold = nullptr, *gaps = nullptr;
	const int64_t *mask = nullptr;   // on lines
	const int64_t *setting_input = nullptr, *setting_value = nullptr;
};

static const size_t THRESHOLD_W = GC_GRAD_WIDTH;
static const size_t DISCARD_ERROR_W = GC_GRAD_WIDTH + 1;
// discard_sum is grad_width + 33 bits wide: read as int64, it is exact while the step's sum
// of discard errors fits in 64 bits.
static const size_t DISCARD_SUM_W = GC_GRAD_WIDTH + 33 < 64 ? GC_GRAD_WIDTH + 33 : 64;

// A write on dram_out, every field (for the check that the payload holds while not taken).
struct DramWrite {
	uint64_t addr = 0;
	int64_t values[LANES] = {};
	uint64_t mask = 0;   // on lines

	bool operator!=(const DramWrite &other) const {
		if (addr != other.addr || mask != other.mask)
			return true;
		for (size_t i = 0; i < LANES; i++)
			if (values[i] != other.values[i])
				return true;
		return false;
	}

	// As Python prints driver.py's payload tuple: (addr, value), or (addr, (v0, v1, ...), mask).
	std::string repr() const {
		std::string s = "(" + std::to_string(addr) + ", ";
		if (LANES == 1)
			return s + std::to_string(values[0]) + ")";
		s += "(";
		for (size_t i = 0; i < LANES; i++)
			s += (i ? ", " : "") + std::to_string(values[i]);
		return s + "), " + std::to_string(mask) + ")";
	}
};

static inline int popcount(uint64_t v) {
	return __builtin_popcountll(v);
}

struct Driver {
	cxxrtl_design::p_top top;
	DramReady dram_ready;
	Waves *waves = nullptr;
	Results r;
	int64_t max_cycles = -1;
	uint64_t cycle = 0;
	bool last_dram_pending = false;
	// Cycles in which current_threshold shows the threshold of an acceptance (in order).
	std::deque<uint64_t> threshold_pending;
	DramWrite last_dram;

	DramWrite read_dram() {
		DramWrite w;
		w.addr = get_field(top.p_dram__out____payload, 0, ADDR_W);
		for (size_t i = 0; i < LANES; i++)
			w.values[i] = sext(get_field(top.p_dram__out____payload, ADDR_W + i * VALUE_W, VALUE_W),
			                   VALUE_W);
		if (LANES > 1)
			w.mask = get_field(top.p_dram__out____payload, DRAM_MASK_AT, LANES);
		return w;
	}

	// Settle the design (as module::step, calling the non-virtual commit).
	void settle() {
		bool converged;
		do {
			converged = top.eval();
		} while (top.commit() && !converged);
	}

	[[noreturn]] void fail(const std::string &message) {
		throw Failure { message };
	}

	void reset() {
		// The Amaranth simulator starts from every signal's init value; CXXRTL's constructor
		// does too, and one cycle with the sync domain's reset held makes sure of it.
		top.p_clk.set<bool>(false);
		top.p_rst.set<bool>(true);
		settle();
		top.p_clk.set<bool>(true);
		settle();
		top.p_clk.set<bool>(false);
		top.p_rst.set<bool>(false);
		settle();
	}

	// One cycle; returns whether a gradient was taken. Mirrors driver.py's `tick`.
	bool tick(bool offering) {
		top.p_dram__out____ready.set<bool>(dram_ready(cycle));
		bool single = GC_SINGLE_DELTA && waves == nullptr;
		bool tracing = waves != nullptr && (int64_t)cycle < waves->cycles;
		if (single) {
			// One eval with the clock rising: it computes every combinational value from the
			// registers and the inputs (the settled values of this cycle, sampled below), then
			// the registers' next values; the commit after sampling is the clock edge.
			top.p_clk.set<bool>(true);
			if (!top.eval())
				fail("the design did not settle in one delta cycle (rebuild without GC_SINGLE_DELTA)");
		} else {
			settle();
			if (tracing)
				waves->sample(10 * cycle);
		}
		while (!threshold_pending.empty() && threshold_pending.front() == cycle) {
			// current_threshold is a register: now, settled, it holds the threshold in force
			// when the gradient was taken GC_THRESHOLD_DELAY cycles before (driver.py reads it
			// after the edge).
			r.accept_thresholds.push_back((int64_t)get_field(top.p_current__threshold, 0, THRESHOLD_W));
			threshold_pending.pop_front();
		}
		bool in_fire = offering && top.p_grad__in____ready.get<bool>();
		if (offering && !in_fire && !top.p_flush.get<bool>())
			r.input_stall_cycles++;
		if (in_fire) {
			r.accepted_addr.push_back((int64_t)get_field(top.p_grad__in____payload, 0, ADDR_W));
			for (size_t i = 0; i < LANES; i++)
				r.accepted_grad.push_back(sext(get_field(top.p_grad__in____payload, ADDR_W + i * GRAD_W,
				                                         GRAD_W), GRAD_W));
			if (LANES > 1)
				r.accepted_mask.push_back((int64_t)get_field(top.p_grad__in____payload, IN_MASK_AT, LANES));
			r.accepted_threshold.push_back((int64_t)get_field(top.p_threshold, 0, GRAD_W));
			r.accept_cycles.push_back((int64_t)cycle);
			threshold_pending.push_back(cycle + GC_THRESHOLD_DELAY);
		}
		bool dram_valid = top.p_dram__out____valid.get<bool>();
		if (last_dram_pending || dram_valid) {
			DramWrite w = read_dram();
			if (last_dram_pending) {
				char buf[128];
				if (!dram_valid) {
					snprintf(buf, sizeof buf, "cycle %" PRIu64 ": dram_out.valid fell before it was taken", cycle);
					fail(buf);
				}
				if (w != last_dram) {
					snprintf(buf, sizeof buf, "cycle %" PRIu64 ": dram_out payload changed from ", cycle);
					fail(std::string(buf) + last_dram.repr() + " to " + w.repr());
				}
			}
			last_dram_pending = false;
			if (dram_valid) {
				if (top.p_dram__out____ready.get<bool>()) {
					if (LANES == 1) {
						r.write_addr.push_back((int64_t)w.addr);
						r.write_value.push_back(w.values[0]);
					} else {
						// One write per lane in the mask, lane by lane (driver.py's _per_address).
						for (size_t i = 0; i < LANES; i++)
							if (w.mask >> i & 1) {
								r.write_addr.push_back((int64_t)(w.addr + i));
								r.write_value.push_back(w.values[i]);
							}
					}
					r.write_cycles.push_back((int64_t)cycle);
				} else {
					r.dram_stall_cycles++;
					last_dram_pending = true;
					last_dram = w;
				}
			}
		}
		// Order of model.CAUSES.
		if (top.p_direct__write.get<bool>())      r.causes.push_back(0);
		if (top.p_accum__write.get<bool>())       r.causes.push_back(1);
		if (top.p_max__updates__write.get<bool>()) r.causes.push_back(2);
		if (top.p_evict__write.get<bool>())       r.causes.push_back(3);
		if (top.p_flush__write.get<bool>())       r.causes.push_back(4);
		if (top.p_stochastic__write.get<bool>())  r.causes.push_back(5);
		r.hits += top.p_l1__hit.get<bool>();
		r.misses += top.p_l1__miss.get<bool>();
		r.bypassed += popcount(get_field(top.p_bypassed, 0, LANES));
		uint64_t discard = get_field(top.p_discard, 0, LANES);
		if (discard) {
			// On lines, one discard per lane set, at the line's address + the lane.
			uint64_t line = get_field(top.p_discard__addr, 0, ADDR_W);
			for (size_t i = 0; i < LANES; i++)
				if (discard >> i & 1) {
					r.discard_addr.push_back((int64_t)(line + i));
					r.discard_error.push_back(sext(get_field(top.p_discard__error, i * DISCARD_ERROR_W,
					                                         DISCARD_ERROR_W), DISCARD_ERROR_W));
				}
		}
		// The clock edge. CXXRTL's eval() computes combinational values before the registers
		// take their next values (in commit()), so after the edge the outputs are stale until
		// the next eval(): outputs read between ticks need a settle() first (clock low, so no
		// edge); tick() itself evaluates before sampling.
		if (single) {
			top.commit();
			top.p_clk.set<bool>(false);
			top.commit();   // only records the clock as low: nothing else changed
		} else {
			top.p_clk.set<bool>(true);
			settle();
			if (tracing)
				waves->sample(10 * cycle + 5);
			top.p_clk.set<bool>(false);
		}
		cycle++;
		if (max_cycles >= 0 && (int64_t)cycle > max_cycles) {
			char buf[128];
			snprintf(buf, sizeof buf, "the run took more than %" PRId64 " cycles", max_cycles);
			fail(buf);
		}
		return in_fire;
	}

	// Tick until idle, within `timeout` cycles; return the cycles taken (driver.py's until_idle).
	int64_t until_idle(const char *raised, int64_t timeout) {
		uint64_t start = cycle;
		while (settle(), !top.p_idle.get<bool>()) {
			if ((int64_t)(cycle - start) > timeout) {
				char buf[160];
				snprintf(buf, sizeof buf,
				         "%s raised at cycle %" PRIu64 " did not reach idle within %" PRId64
				         " cycles", raised, start, timeout);
				fail(buf);
			}
			tick(false);
		}
		return (int64_t)(cycle - start);
	}

	void run(const Ops &ops, int64_t idle_hold, int64_t flush_timeout, int64_t progress_every) {
		int64_t g = 0;   // next gradient
		int64_t s = 0;   // next mode setting
		for (int64_t index = 0; index < ops.n_ops; index++) {
			if (progress_every > 0 && index > 0 && index % progress_every == 0) {
				printf("progress %" PRId64 "\n", index);
				fflush(stdout);
			}
			uint8_t kind = ops.kind[index];
			if (kind == 0) {
				int64_t gap = ops.gap_mode == 0 ? 0 : ops.gap_mode == 1 ? ops.gap : ops.gaps[g];
				for (int64_t i = 0; i < gap; i++)
					tick(false);
				top.p_threshold.set<uint64_t>((uint64_t)ops.threshold[g] & mask_of(GRAD_W));
				set_field(top.p_grad__in____payload, 0, ADDR_W, (uint64_t)ops.addr[g]);
				for (size_t i = 0; i < LANES; i++)
					set_field(top.p_grad__in____payload, ADDR_W + i * GRAD_W, GRAD_W,
					          (uint64_t)ops.grad[g * LANES + i]);
				if (LANES > 1)
					set_field(top.p_grad__in____payload, IN_MASK_AT, LANES, (uint64_t)ops.mask[g]);
				g++;
				top.p_grad__in____valid.set<bool>(true);
				while (!tick(true)) {}
				top.p_grad__in____valid.set<bool>(false);
			} else if (kind == 1) {
				top.p_flush.set<bool>(true);
				r.flush_cycles.push_back(until_idle("flush", flush_timeout));
				r.step_discard_count.push_back((int64_t)get_field(top.p_discard__count, 0, 32));
				r.step_discard_sum.push_back(sext(get_field(top.p_discard__sum, 0, DISCARD_SUM_W),
				                                  DISCARD_SUM_W));
				for (int64_t i = 0; i < idle_hold; i++) {
					tick(false);
					settle();
					if (!top.p_idle.get<bool>()) {
						char buf[128];
						snprintf(buf, sizeof buf, "cycle %" PRIu64 ": idle fell while flush was high", cycle);
						fail(buf);
					}
				}
				top.p_flush.set<bool>(false);
			} else if (kind == 2) {
				set_mode_input(top, ops.setting_input[s], (uint64_t)ops.setting_value[s]);
				s++;
			} else if (kind == 3) {
				// As driver.py: hold lfsr_load until idle, then one cycle more (the load).
				top.p_lfsr__seed.set<uint64_t>((uint64_t)ops.setting_value[s] & mask_of(32));
				s++;
				top.p_lfsr__load.set<bool>(true);
				until_idle("lfsr_load", flush_timeout);
				tick(false);
				top.p_lfsr__load.set<bool>(false);
			} else {
				char buf[64];
				snprintf(buf, sizeof buf, "unknown operation kind %d", (int)kind);
				fail(buf);
			}
		}
		r.cycles = (int64_t)cycle;
		// The last thresholds, after the run (as driver.py: bare clock cycles, inputs held,
		// nothing else recorded).
		for (uint64_t c = cycle; !threshold_pending.empty(); c++) {
			settle();
			while (!threshold_pending.empty() && threshold_pending.front() == c) {
				r.accept_thresholds.push_back((int64_t)get_field(top.p_current__threshold, 0, THRESHOLD_W));
				threshold_pending.pop_front();
			}
			top.p_clk.set<bool>(true);
			settle();
			top.p_clk.set<bool>(false);
		}
	}
};

template<class T>
static void put(FILE *f, const std::vector<T> &v) {
	if (!v.empty() && fwrite(v.data(), sizeof(T), v.size(), f) != v.size()) {
		perror("write");
		exit(2);
	}
}

// Results file: 13 int64 (n_accepted, n_writes, n_causes, n_flushes, input_stall_cycles,
// dram_stall_cycles, hits, misses, cycles, run_ns, n_discards, bypassed, n_lane_writes), then
// int64 columns accepted_addr, accepted_grad, accepted_threshold, accept_cycles,
// accept_thresholds (n each), write_addr, write_value, write_cycles (m each), flush_cycles,
// step_discard_count, step_discard_sum (f each), discard_addr, discard_error (d each), then
// uint8 causes (k). With one lane n_lane_writes is 0. On lines accepted_grad holds n * lanes
// values, an accepted_mask column (n) follows accept_thresholds, and write_addr and
// write_value hold n_lane_writes entries (one per lane written), write_cycles m.
static void write_results(const char *path, const Results &r, int64_t run_ns) {
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(2);
	}
	int64_t header[13] = {
		(int64_t)r.accept_cycles.size(), (int64_t)r.write_cycles.size(), (int64_t)r.causes.size(),
		(int64_t)r.flush_cycles.size(), r.input_stall_cycles, r.dram_stall_cycles, r.hits, r.misses,
		r.cycles, run_ns, (int64_t)r.discard_addr.size(), r.bypassed,
		LANES == 1 ? 0 : (int64_t)r.write_addr.size(),
	};
	if (fwrite(header, sizeof header, 1, f) != 1) {
		perror("write");
		exit(2);
	}
	put(f, r.accepted_addr);
	put(f, r.accepted_grad);
	put(f, r.accepted_threshold);
	put(f, r.accept_cycles);
	put(f, r.accept_thresholds);
	put(f, r.accepted_mask);   // empty with one lane
	put(f, r.write_addr);
	put(f, r.write_value);
	put(f, r.write_cycles);
	put(f, r.flush_cycles);
	put(f, r.step_discard_count);
	put(f, r.step_discard_sum);
	put(f, r.discard_addr);
	put(f, r.discard_error);
	put(f, r.causes);
	if (fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

static std::vector<char> read_file(const char *path) {
	std::vector<char> data;
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	char buf[1 << 16];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		data.insert(data.end(), buf, buf + n);
	fclose(f);
	return data;
}

// Point `ops` into `data` (which must outlive it); false if the file is malformed.
static bool parse_ops(const std::vector<char> &data, Ops &ops) {
	const size_t header = 5 * sizeof(int64_t);
	if (data.size() < header)
		return false;
	int64_t h[5];
	memcpy(h, data.data(), header);
	ops.n_ops = h[0], ops.n_grads = h[1], ops.gap_mode = h[2], ops.gap = h[3];
	ops.n_settings = h[4];
	if (ops.n_ops < 0 || ops.n_grads < 0 || ops.n_settings < 0 ||
	    ops.n_grads + ops.n_settings > ops.n_ops || ops.gap_mode < 0 || ops.gap_mode > 2)
		return false;
	// Columns of n_grads entries: addr, grad (LANES of them), threshold, mask (on lines), gaps.
	size_t columns = 2 + LANES + (LANES > 1) + (ops.gap_mode == 2);
	size_t kind_bytes = ((size_t)ops.n_ops + 7) / 8 * 8;   // keeps the columns aligned
	if (data.size() != header + kind_bytes + columns * sizeof(int64_t) * (size_t)ops.n_grads +
	                   2 * sizeof(int64_t) * (size_t)ops.n_settings)
		return false;
	const char *p = data.data() + header;
	ops.kind = (const uint8_t *)p;
	p += kind_bytes;
	ops.addr = (const int64_t *)p;
	ops.grad = ops.addr + ops.n_grads;
	ops.threshold = ops.grad + LANES * ops.n_grads;
	const int64_t *next = ops.threshold + ops.n_grads;
	if (LANES > 1) {
		ops.mask = next;
		next += ops.n_grads;
	}
	if (ops.gap_mode == 2) {
		ops.gaps = next;
		next += ops.n_grads;
	}
	ops.setting_input = next;
	ops.setting_value = ops.setting_input + ops.n_settings;
	int64_t grads = 0, settings = 0;
	for (int64_t i = 0; i < ops.n_ops; i++) {
		if (ops.kind[i] > 3)
			return false;
		grads += ops.kind[i] == 0;
		settings += ops.kind[i] >= 2;
	}
	for (int64_t i = 0; i < ops.n_settings; i++)
		if (ops.setting_input[i] < 0 || ops.setting_input[i] >= GC_MODE_INPUTS)
			return false;
	return grads == ops.n_grads && settings == ops.n_settings;
}

int main(int argc, char **argv) {
	if (argc != 13) {
		fprintf(stderr, "usage: %s OPS OUT DRAM_MODE SEED PROBABILITY MAX_STALL IDLE_HOLD "
		                "FLUSH_TIMEOUT MAX_CYCLES PATTERN VCD VCD_CYCLES\n", argv[0]);
		return 1;
	}
	std::vector<char> ops_data = read_file(argv[1]);
	Ops ops;
	if (!parse_ops(ops_data, ops)) {
		fprintf(stderr, "%s: malformed operations file\n", argv[1]);
		return 2;
	}

	Driver *d = new Driver;   // the design can be large: keep it off the stack
	d->dram_ready.mode = atoi(argv[3]);
	d->dram_ready.rng.state = strtoull(argv[4], nullptr, 10);
	d->dram_ready.probability = strtod(argv[5], nullptr);
	d->dram_ready.max_stall = strtoll(argv[6], nullptr, 10);
	int64_t idle_hold = strtoll(argv[7], nullptr, 10);
	int64_t flush_timeout = strtoll(argv[8], nullptr, 10);
	d->max_cycles = strtoll(argv[9], nullptr, 10);
	if (d->dram_ready.mode == 3) {
		if (strcmp(argv[10], "-") == 0 || argv[10][0] == 0) {
			fprintf(stderr, "DRAM_MODE 3 needs a PATTERN\n");
			return 1;
		}
		d->dram_ready.pattern = argv[10];
	}
	size_t n_grads = (size_t)ops.n_grads;
	for (auto *v : { &d->r.accepted_addr, &d->r.accepted_threshold, &d->r.accept_cycles,
	                 &d->r.write_addr, &d->r.write_value, &d->r.write_cycles })
		v->reserve(n_grads + 64);
	d->r.accepted_grad.reserve(n_grads * LANES + 64);
	if (LANES > 1)
		d->r.accepted_mask.reserve(n_grads + 64);
	d->r.causes.reserve(n_grads + 64);

	const char *progress_env = getenv("GC_PROGRESS_EVERY");
	int64_t progress_every = progress_env ? strtoll(progress_env, nullptr, 10) : 0;

	Waves waves;
	if (strcmp(argv[11], "-") != 0) {
		if (!waves.open(argv[11], strtoll(argv[12], nullptr, 10), d->top)) {
			perror(argv[11]);
			return 2;
		}
		d->waves = &waves;
	}

	auto t0 = std::chrono::steady_clock::now();
	try {
		d->reset();
		d->run(ops, idle_hold, flush_timeout, progress_every);
	} catch (const Failure &failure) {
		waves.close();   // the waveform up to the failure is the useful part
		fprintf(stderr, "ASSERTION: %s\n", failure.message.c_str());
		return 3;
	}
	auto t1 = std::chrono::steady_clock::now();
	waves.close();
	int64_t run_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
	write_results(argv[2], d->r, run_ns);
	return 0;
}
